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
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

from livekit.agents.telemetry import loop_monitor


@contextlib.contextmanager
def watching(name: str, *, spans: bool = True) -> Iterator[None]:
    """Watch the running loop while the block runs, at the thresholds of the environment (as
    livekit-agents watches its job processes), unless it is watched already (a job process's
    loop) or turned off (``LIVEKIT_AGENTS_LOOP_BLOCK_WARN_MS=0``); ``spans``: its reports as
    spans too (a job's, in the call's trace), else only the warning and the metric (a main
    process's)."""
    loop = asyncio.get_running_loop()
    thresholds = loop_monitor.LoopMonitorThresholds.from_env()  # None: turned off
    started = thresholds and loop_monitor.start_monitoring(
        loop, thresholds=thresholds, name=name, emit_spans=spans
    )
    try:
        yield
    finally:
        if started is not None:
            loop_monitor.stop_monitoring(loop)
