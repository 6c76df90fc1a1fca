"""How late a process's event loop runs: every wake of a watcher that should have come
:data:`EVERY_S` after the last and came :data:`THRESHOLD_MS` or more later is logged (issue 20:
"no event loop of the worker, the overflow or a service blocked past 50 ms").

A late wake is one of two things, told apart by the CPU the loop's own thread used meanwhile
(``time.thread_time``, the watcher runs on that thread):

* ``blocked``: the loop's thread ran at least :data:`THRESHOLD_MS` of CPU in the interval — a
  callback of this process held it (a TLS context built, a file parsed, a model loaded on the
  loop). This is the defect; ``up`` reports it per process (``pinecall_runtime.up.loops``).
* ``stalled``: late without running — the thread waited for a CPU (the machine full), for the GIL
  (another thread of the process computing), or in a blocking system call. Logged at INFO: nothing
  in the code to fix (livekit-agents' monitor does not log it at all).

An app run in a test's own event loop (:func:`pinecall_servicekit.testing.apps.running`) shares
that loop with the test and its other apps: it watches nothing (:data:`SHARED`), since it would
time the test, not itself.

asyncio's own slow-callback warning needs ``PYTHONASYNCIODEBUG`` (costly) and uvloop, which the
services run on, has none; livekit-agents 1.8.9 installs its ``hook_slow_callbacks`` nowhere. A
watcher task measures any loop at the cost of ten wakes a second.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable

_log = logging.getLogger("pinecall.loop")

THRESHOLD_MS = 50.0
"""A wake this many milliseconds late or more is logged (issue 20's bound)."""
EVERY_S = 0.1
"""Seconds between the watcher's wakes."""
MARK = "event loop late by"
"""The words every line of it starts with, that ``up`` looks for in its logs."""

SHARED: contextvars.ContextVar[bool] = contextvars.ContextVar("loop_shared", default=False)
"""True where the loop is not the app's own (a test's): :func:`watching` watches nothing."""
LATE: Counter[str] = Counter()
"""This process's late wakes so far, by kind (``blocked``, ``stalled``)."""


Late = Callable[[str, float], None]
"""Told of each late wake: its kind and how late, in milliseconds."""


async def watch(
    name: str,
    *,
    threshold_ms: float = THRESHOLD_MS,
    every_s: float = EVERY_S,
    on_late: Late | None = None,
) -> None:
    """Watch the running loop until cancelled; ``name`` says whose loop in each line:
    ``event loop late by <ms> ms (<kind>: <ms> ms of CPU on the loop) in <name>``."""
    loop = asyncio.get_running_loop()
    while True:
        woke, cpu = loop.time(), time.thread_time()
        await asyncio.sleep(every_s)
        late_ms = (loop.time() - woke - every_s) * 1000.0
        if late_ms < threshold_ms:
            continue
        ran_ms = (time.thread_time() - cpu) * 1000.0
        kind = "blocked" if ran_ms >= threshold_ms else "stalled"
        LATE[kind] += 1
        _log.log(
            logging.WARNING if kind == "blocked" else logging.INFO,
            "%s %d ms (%s: %d ms of CPU on the loop) in %s",
            MARK,
            late_ms,
            kind,
            ran_ms,
            name,
        )
        if on_late is not None:
            on_late(kind, late_ms)


@contextlib.asynccontextmanager
async def watching(
    name: str,
    *,
    threshold_ms: float = THRESHOLD_MS,
    every_s: float = EVERY_S,
    on_late: Late | None = None,
) -> AsyncIterator[None]:
    """:func:`watch` the running loop while the block runs (a service's life); nothing where
    :data:`SHARED` is set."""
    if SHARED.get():
        yield
        return
    task = asyncio.create_task(
        watch(name, threshold_ms=threshold_ms, every_s=every_s, on_late=on_late),
        name=f"loopwatch {name}",
    )
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
