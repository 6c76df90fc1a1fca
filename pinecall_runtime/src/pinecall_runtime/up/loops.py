"""How late the run's event loops ran (issue 20, "no event loop … blocked past 50 ms"), from the
run's logs: the services' ``event loop late by`` lines (:mod:`pinecall_servicekit.loopwatch`),
and the worker's and the overflow's ``event loop blocked for`` (livekit-agents' monitor at its
100 ms, :mod:`pinecall_jobs.loops`, whose warnings say the CPU the loop ran meanwhile:
``pinecall_jobs.loops.say_loop_cpu``). One rule for both, the watcher's: late with at least
:data:`~pinecall_servicekit.loopwatch.THRESHOLD_MS` of the loop's own CPU is ``blocked``, late
with less is ``stalled``; a warning that says no CPU (an older log) is ``blocked``.
``blocked`` (the loop's own code held it) is what issue 20 counts; ``stalled`` (the loop waited
for a CPU, the GIL or a system call) says how full the machine was. Reported, not a problem: on a
machine that runs every process of the platform, a loaded core stalls loops that would run alone.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pinecall_servicekit.loopwatch import MARK, THRESHOLD_MS

LINE = re.compile(
    re.escape(MARK) + r" (\d+) ms \((blocked|stalled): (\d+) ms of CPU on the loop\) in ([^\"\n]+)"
)
"""A watcher's line, in a plain or a JSON log: how late, the kind, the CPU, whose loop."""
LIVEKIT = re.compile(
    r"event loop blocked for (\d+)ms(?: importing (\S+?))?(?: at ([^;\n]+?))?"
    r"(?: \(the loop ran (\d+) ms of CPU\))?;"
)
"""livekit-agents' monitor's warning: how long, the module it was importing, the line it held,
the CPU the loop ran meanwhile."""


def count(logs: Iterable[Path]) -> dict[str, Any]:
    """``{"blocked": n, "stalled": n, "worst": {kind: "<ms> ms in <log>: <loop>"}}`` over
    ``logs`` (a file that cannot be read is skipped)."""
    kinds = {"blocked": 0, "stalled": 0}
    worst: dict[str, tuple[int, str]] = {}
    for log in logs:
        try:
            text = log.read_text(errors="replace")
        except OSError:
            continue
        for match in LINE.finditer(text):
            late, kind, loop = int(match[1]), match[2], match[4].strip()
            kinds[kind] += 1
            if late > worst.get(kind, (-1, ""))[0]:
                worst[kind] = (late, f"{log.name}: {loop}")
        for match in LIVEKIT.finditer(text):
            late = int(match[1])
            ran = THRESHOLD_MS if match[4] is None else int(match[4])
            kind = "blocked" if ran >= THRESHOLD_MS else "stalled"
            kinds[kind] += 1
            line = (match[3] or "an unknown line").replace('\\"', "").replace('"', "")
            where = f"importing {match[2]}" if match[2] else f"at {line}"
            if late > worst.get(kind, (-1, ""))[0]:
                worst[kind] = (late, f"{log.name}: {where}")
    return kinds | {"worst": {k: f"{ms} ms in {where}" for k, (ms, where) in worst.items()}}


def summary(loops: dict[str, Any]) -> str:
    """The terminal's line of :func:`count`'s result."""
    worst = loops["worst"]
    parts = [
        f"loops: {loops['blocked']} blocked (a service's past {THRESHOLD_MS:.0f} ms,"
        " a worker's or an overflow's past livekit-agents' 100 ms)"
        + (f" (worst {worst['blocked']})" if "blocked" in worst else ""),
        f"{loops['stalled']} stalled (waiting for a CPU, the GIL or a system call)"
        + (f" (worst {worst['stalled']})" if "stalled" in worst else ""),
    ]
    return ", ".join(parts)
