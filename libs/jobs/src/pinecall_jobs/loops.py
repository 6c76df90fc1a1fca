"""The worker's and the overflow's event loops, watched at issue 20's 50 ms by livekit-agents'
own monitor (``livekit.agents.telemetry.loop_monitor``, 1.8.9): a heartbeat on the loop and a
watchdog thread that samples the loop's stack while it is held, so its warning names the line
(``event loop blocked for <ms>ms at <file:line>; …``), and says nothing when the process itself was
not running (the loop thread used no CPU: the machine full, nothing in the code to fix).

livekit-agents starts it on every job *process* at its default 100 ms, read from
``LIVEKIT_AGENTS_LOOP_BLOCK_WARN_MS``, and nowhere else when its CLI is not used, as ours is not.
So :func:`watch_job_processes` sets that variable before the server starts its job processes,
and :func:`watching` starts it on a loop of ours: the main process's (``serve_until_stopped``)
and each job's in a thread (the overflow's jobs; the worker's in tests), where it is not running
yet. ``up`` counts the warnings (``pinecall_runtime.up.loops``). The services, which have no
livekit-agents, run :mod:`pinecall_servicekit.loopwatch`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Iterator

from livekit.agents.telemetry import loop_monitor

WARN_MS = 50
"""A loop held this many milliseconds or more is warned of (issue 20)."""
ERROR_MS = 500
"""… and past this, its span is an error (livekit-agents' own default)."""


def watch_job_processes() -> None:
    """Have every job process started from now on watched at :data:`WARN_MS` (an operator's own
    ``LIVEKIT_AGENTS_LOOP_BLOCK_WARN_MS`` wins; ``0`` turns the monitor off)."""
    os.environ.setdefault(loop_monitor.ENV_WARN_THRESHOLD_MS, str(WARN_MS))
    os.environ.setdefault(loop_monitor.ENV_ERROR_THRESHOLD_MS, str(ERROR_MS))


@contextlib.contextmanager
def watching(name: str, *, spans: bool = True) -> Iterator[None]:
    """Watch the running loop while the block runs, unless it is watched already (a job
    process's loop, by livekit-agents); ``spans``: its reports as spans too (a job's, in the
    call's trace), else only the warning and the metric (a main process's)."""
    loop = asyncio.get_running_loop()
    watch_job_processes()
    thresholds = loop_monitor.LoopMonitorThresholds.from_env()  # None: turned off
    started = thresholds and loop_monitor.start_monitoring(
        loop, thresholds=thresholds, name=name, emit_spans=spans
    )
    try:
        yield
    finally:
        if started is not None:
            loop_monitor.stop_monitoring(loop)
