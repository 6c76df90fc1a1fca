"""The worker's and the overflow's event loops, watched by livekit-agents' own monitor
(``livekit.agents.telemetry.loop_monitor``, 1.8.9): a heartbeat on the loop and a watchdog thread
that samples the loop's stack while it is held, so its warning names the line (``event loop
blocked for <ms>ms at <file:line>; …``), and says nothing when the process itself was not running
(the loop thread used no CPU: the machine full, nothing in the code to fix).

livekit-agents starts it on every job *process*, and nowhere else when its CLI is not used, as
ours is not: :func:`watching` starts it on a loop of ours too, the main process's
(``serve_until_stopped``) and each job's in a thread (the overflow's jobs; the worker's in
tests), where it is not running yet. ``up`` counts the warnings (``pinecall_runtime.up.loops``);
the services, which have no livekit-agents, run :mod:`pinecall_servicekit.loopwatch` at 50 ms.

**At its default 100 ms, not issue 20's 50.** Its tick is a fifth of the threshold, two wakes a
tick (the loop's and the watchdog thread's, which takes the GIL), in every job process: at 50 ms
(``LIVEKIT_AGENTS_LOOP_BLOCK_WARN_MS=50``) ``up --calls 40 --rate 2`` had 3 and 9 job processes
killed for not closing within their 5 s and 12 callers silent, where with it off (``0``) the same
run passed with every recording verified, and at 100 ms (what livekit-agents does unasked) passed
too. An operator sets ``LIVEKIT_AGENTS_LOOP_BLOCK_WARN_MS`` to look closer, at that price.

**Its stack sample, made safe on CPython 3.11** (:func:`make_sampling_safe`): the watchdog takes
the loop's stack with ``sys._current_frames()``, which on 3.11 can deadlock its own thread
(python/cpython#106883: it holds the runtime's head lock while it makes frame objects; an
allocation there may start a collection whose deallocation of a thread-local object takes the
same lock). Seen here: an overflow process hung in that frame under ``up`` with the monitor at
20 ms (py-spy: ``_PyThread_CurrentFrames → gc_collect_main → PyThread_acquire_lock_timed``),
and its callers were silent.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import logging
import sys
import threading
from collections.abc import Iterator
from typing import Any

from livekit.agents.telemetry import loop_monitor

_SAMPLING = threading.Lock()
"""Held around every stack sample of a loop monitor in this process."""
_MARK = "_pinecall_sampled_without_collection"


def make_sampling_safe() -> None:
    """livekit-agents' loop monitors of this process take their stack samples with the garbage
    collector off, one sample at a time (two watchdogs would each turn it back on under the
    other), and turn it back on only if it was on: the fix proposed for 3.11
    (python/cpython#117332, not merged; 3.12 collects only at the eval breaker). A sample is
    taken only once a loop is late, and lasts microseconds to a few milliseconds. Idempotent; on
    3.12 and later it does nothing."""
    monitor: Any = loop_monitor.EventLoopMonitor
    if sys.version_info >= (3, 12) or getattr(monitor, _MARK, False):
        return
    sample = monitor._sample_loop_thread

    @functools.wraps(sample)
    def without_collection(self: Any, lag: float) -> Any:
        with _SAMPLING:
            collecting = gc.isenabled()
            gc.disable()
            try:
                return sample(self, lag)
            finally:
                if collecting:
                    gc.enable()

    monitor._sample_loop_thread = without_collection
    setattr(monitor, _MARK, True)


BLOCKED = "event loop blocked for"
"""How livekit-agents' loop warning begins (``telemetry/loop_monitor.py`` ``_emit_log``)."""
CPU_SAID = "the loop ran"


class _LoopCpu(logging.Filter):
    """Writes into livekit-agents' ``event loop blocked`` warning the CPU its loop ran meanwhile
    (the record's ``cpu_time``, which only a JSON log shows): ``… in f (the loop ran 12 ms of
    CPU); …``."""

    def filter(self, record: logging.LogRecord) -> bool:
        cpu = getattr(record, "cpu_time", None)
        text = record.msg
        said = isinstance(text, str) and text.startswith(BLOCKED) and CPU_SAID not in text
        if said and isinstance(cpu, float):
            head, sep, tail = text.partition(";")
            record.msg = f"{head} ({CPU_SAID} {cpu * 1000:.0f} ms of CPU){sep}{tail}"
        return True


_SAYING = _LoopCpu()


def say_loop_cpu() -> None:
    """livekit-agents' loop warnings of this process say, in their text, the CPU the loop's
    thread ran during the block. A warning comes once a loop is 100 ms late; whether its own
    code held it (``up`` counts it blocked from 50 ms of CPU, the services' rule,
    ``pinecall_servicekit.loopwatch``) or it waited for a core is told by that CPU: in
    ``up --calls 40 --rate 2`` (2026-12-04, JSON logs) 43 warnings of 101–330 ms had 0–24 ms of
    CPU each, most 7–12 ms, the machine's run queue at 6 on its two cores. Idempotent."""
    logger = logging.getLogger("livekit.agents")
    if _SAYING not in logger.filters:
        logger.addFilter(_SAYING)


@contextlib.contextmanager
def watching(name: str, *, spans: bool = True) -> Iterator[None]:
    """Watch the running loop while the block runs, at the thresholds of the environment (as
    livekit-agents watches its job processes), unless it is watched already (a job process's
    loop) or turned off (``LIVEKIT_AGENTS_LOOP_BLOCK_WARN_MS=0``); ``spans``: its reports as
    spans too (a job's, in the call's trace), else only the warning and the metric (a main
    process's)."""
    loop = asyncio.get_running_loop()
    make_sampling_safe()
    say_loop_cpu()
    thresholds = loop_monitor.LoopMonitorThresholds.from_env()  # None: turned off
    started = thresholds and loop_monitor.start_monitoring(
        loop, thresholds=thresholds, name=name, emit_spans=spans
    )
    try:
        yield
    finally:
        if started is not None:
            loop_monitor.stop_monitoring(loop)
