"""Closing an ``AgentServer`` without the hang of livekit-agents 1.8.9's thread executor.

``ProcPool.aclose`` cancels its main task, which first cancels the spawns in flight and only
then closes every executor (``livekit/agents/ipc/proc_pool.py``, ``_main_task``'s
``except CancelledError``). A ``ThreadJobExecutor`` whose ``initialize()`` is cancelled never
resolves its ``_initialize_fut`` (``ipc/job_thread_executor.py``, ``initialize`` catches only
``TimeoutError`` and ``Exception``), so its ``_main_task`` never starts the monitor that would
hear the thread's ``ShuttingDown``, and its ``aclose()`` waits for that for ever; the pool's
close waits on it, and every other executor — a job thread still holding its room — is never
told to shut down. The process executor kills a process it never initialized instead
(``ipc/supervised_proc.py``, ``aclose``). The overflow runs its jobs in threads, and so do the
lab's workers: a SIGTERM (or a test's end) just as a job took an idle thread and the pool warmed
another hung the close.

:func:`close_server` lets the spawns in flight finish first, so nothing is cancelled mid-way.
"""

from __future__ import annotations

import asyncio
import logging

from livekit.agents import AgentServer

_log = logging.getLogger(__name__)

SPAWN_S = 30.0
"""How long a spawn in flight may take to finish before the close goes on anyway (seconds;
livekit-agents' own ``initialize_process_timeout`` is 10 s)."""


async def settled(server: AgentServer, *, within_s: float = SPAWN_S) -> bool:
    """Wait until ``server``'s pool warms no job process or thread; False if one still did
    after ``within_s`` seconds. A server that never ran is settled."""
    pool = getattr(server, "_proc_pool", None)  # made by run(); no public handle in 1.8.9
    spawns: set[asyncio.Task[None]] = getattr(pool, "_spawn_tasks", set())
    try:
        async with asyncio.timeout(within_s):
            while warming := {t for t in spawns if not t.done()}:
                await asyncio.wait(warming)
    except TimeoutError:
        return False
    return True


async def close_server(server: AgentServer, *, within_s: float = SPAWN_S) -> None:
    """``server.aclose()``, once the job processes or threads it is warming are ready (see the
    module docstring); after ``within_s`` seconds of warming it closes anyway, and says so.

    The pool is first told to keep no process warm (``ProcPool._default_num_idle_processes``,
    the cap of its ``_main_task``'s target), so it starts no new warm-up between the wait and the
    close: its main task ticks every 0.1 s, and a warm-up it began there was cancelled by the
    close and hung it (``tests/dispatcher/test_offers.py`` hung once in teardown so, at load 4)."""
    pool = getattr(server, "_proc_pool", None)  # made by run(); no public handle in 1.8.9
    if pool is not None:
        pool._default_num_idle_processes = 0
    if not await settled(server, within_s=within_s):
        _log.error("a job process still starting after %.0f s: closing anyway", within_s)
    await server.aclose()
