"""``up`` counts the event loops its processes' watchers said were late (issue 20), from real
watcher lines in a plain and a JSON log, and livekit-agents' monitor's in a worker's."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path

from pinecall_jobs.loops import watching
from pinecall_runtime.up import loops
from pinecall_servicekit import loopwatch


async def _late_lines(hold_s: float) -> list[str]:
    """The lines one watcher writes about a loop held ``hold_s`` of its thread's CPU."""
    said: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: said.append(record.getMessage())  # type: ignore[method-assign]
    logger = logging.getLogger("pinecall.loop")
    logger.addHandler(handler)
    heard = asyncio.Event()
    try:
        async with loopwatch.watching(
            "job AJ_1 (answer call_7)", every_s=0.01, on_late=lambda *_: heard.set()
        ):
            await asyncio.sleep(0)
            until = time.thread_time() + hold_s
            while time.thread_time() < until:
                pass
            async with asyncio.timeout(30):
                await heard.wait()
    finally:
        logger.removeHandler(handler)
    return said


def test_up_counts_blocked_and_stalled_loops_in_plain_and_json_logs(tmp_path: Path) -> None:
    # the one blocked line of the spin (a busy machine may stall a wake more, said at INFO)
    (blocked,) = [line for line in asyncio.run(_late_lines(0.12)) if "(blocked: " in line]
    stalled = "event loop late by 300 ms (stalled: 2 ms of CPU on the loop) in call-log"
    (tmp_path / "worker-1.log").write_text(
        f"2026-12-04 05:00:00 WARNING pinecall.loop: {blocked}\n"
    )
    (tmp_path / "call-log-1.log").write_text(
        json.dumps({"level": "warning", "message": stalled, "service": "call-log"}) + "\n"
    )
    (tmp_path / "roster-1.log").write_text("nothing late here\n")

    alone = loops.count(sorted(tmp_path.glob("*.log")))

    assert (alone["blocked"], alone["stalled"]) == (1, 1)
    spun = int(blocked.split()[4])  # "event loop late by <ms> ms …": how late the spin made it
    assert spun >= 110
    assert alone["worst"]["blocked"] == f"{spun} ms in worker-1.log: job AJ_1 (answer call_7)"
    assert alone["worst"]["stalled"] == "300 ms in call-log-1.log: call-log"

    worse = spun + 100  # livekit-agents' monitor's lines beside it, one of them the worst
    # as livekit-agents 1.8.9 writes them (``telemetry/loop_monitor.py`` ``_emit_log``), plainly
    # and in a JSON log, whose quotes are escaped
    held = f'event loop blocked for {worse}ms at "/py/ssl.py", line 770, in create_default_context'
    (tmp_path / "worker-2.log").write_text(
        f"WARNING livekit.agents: {held}; synchronous work on the agent loop delays audio and "
        "turn handling, move it to a thread or an async client\n"
        "WARNING livekit.agents: event loop blocked for 70ms importing httpcore; import it at "
        "process warm-up (prewarm) instead of on first use\n"
        "WARNING livekit.agents: event loop blocked for 106ms; synchronous work on the agent loop\n"
    )
    (tmp_path / "overflow.log").write_text(
        json.dumps({"message": 'event loop blocked for 60ms at "/x/a.py", line 2, in f; sync'})
        + "\n"
    )
    late = loops.count(sorted(tmp_path.glob("*.log")))

    assert (late["blocked"], late["stalled"]) == (5, 1)
    assert late["worst"]["blocked"] == (
        f"{worse} ms in worker-2.log: at /py/ssl.py, line 770, in create_default_context"
    )
    assert loops.summary(late).startswith(
        "loops: 5 blocked (a service's past 50 ms, a worker's or an overflow's past"
        f" livekit-agents' 100 ms) (worst {worse} ms in "
    )
    assert loops.count([]) == {"blocked": 0, "stalled": 0, "worst": {}}


class _Kept(logging.Handler):
    """livekit-agents' warnings, formatted as a plain log writes them."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []
        self.came = threading.Event()
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("event loop blocked for"):
            self.lines.append(self.format(record))
            self.came.set()


async def _held(hold: Callable[[], None], kept: _Kept) -> str:
    """The warning of livekit-agents' monitor (its 100 ms) once ``hold`` held the loop."""
    kept.came.clear()
    hold()
    assert await asyncio.to_thread(kept.came.wait, 10)
    return kept.lines[-1]


def _spin(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


async def test_a_warning_says_the_loops_cpu_and_up_counts_a_loop_that_waited_as_stalled(
    tmp_path: Path,
) -> None:
    """A loop held by its own code (a spin: 300 ms of CPU) is blocked; a loop held 300 ms without
    running (as a loop waits for a core on a full machine) is stalled (``say_loop_cpu``)."""
    kept = _Kept()
    logging.getLogger("livekit.agents").addHandler(kept)
    try:
        with watching("test"):
            await asyncio.sleep(0)  # its start arms it on the loop (call_soon_threadsafe)
            spun = await _held(lambda: _spin(0.3), kept)
            waited = await _held(lambda: time.sleep(0.3), kept)
    finally:
        logging.getLogger("livekit.agents").removeHandler(kept)
    assert re.search(r" \(the loop ran (2[5-9]\d|[3-9]\d\d) ms of CPU\);", spun), spun
    assert re.search(r" \(the loop ran \d{1,2} ms of CPU\);", waited), waited
    (tmp_path / "worker.log").write_text(f"{spun}\n{waited}\n")
    counted = loops.count([tmp_path / "worker.log"])
    assert (counted["blocked"], counted["stalled"]) == (1, 1)
    assert counted["worst"]["blocked"].endswith("in _spin")
