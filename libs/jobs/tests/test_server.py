"""An AgentServer whose pool is warming a job thread closes once that thread is ready, and leaves
no thread behind (``pinecall_jobs.server``: livekit-agents 1.8.9's thread executor can hang when
that warming is cancelled)."""

from __future__ import annotations

import asyncio
import contextlib
import threading

import pytest
from livekit import api
from livekit.agents import AgentServer, JobContext, JobExecutorType, JobProcess

from pinecall_jobs.server import close_server, settled
from pinecall_loadlab.livekit import StandIn
from pinecall_loadlab.livekit import events as ev
from pinecall_loadlab.livekit.testing import *  # noqa: F403  (the stand-in's fixtures)
from pinecall_loadlab.livekit.testing import API_KEY, API_SECRET


def job_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name == "job_thread_runner"}


async def test_a_server_closed_while_it_warms_a_job_thread_waits_for_it_then_closes(
    standin: StandIn, livekit_api: api.LiveKitAPI
) -> None:
    """A job takes the one idle thread; the pool warms the next, slowly (its setup waits on
    ``warmed``); the server is closed then."""
    warming, warmed = threading.Event(), threading.Event()
    setups: list[threading.Thread] = []

    def setup(_proc: JobProcess) -> None:  # the second thread is slow to import its plugins
        setups.append(threading.current_thread())
        if len(setups) > 1:
            warming.set()
            warmed.wait(30)

    async def entry(ctx: JobContext) -> None:
        ctx.shutdown("done")

    server = AgentServer(
        ws_url=standin.url,
        api_key=API_KEY,
        api_secret=API_SECRET,
        job_executor_type=JobExecutorType.THREAD,
        num_idle_processes=1,
        initialize_process_timeout=60,
        setup_fnc=setup,
        load_fnc=lambda: 0.0,
        port=0,
    )
    server.rtc_session(entry, agent_name="closing")
    before = job_threads()
    served = asyncio.create_task(server.run(devmode=False))
    try:
        async with asyncio.timeout(30):
            [registered] = await standin.events.wait_for(ev.WorkerRegistered)
            await livekit_api.agent_dispatch.create_dispatch(
                api.CreateAgentDispatchRequest(agent_name="closing", room="call-1")
            )
            await asyncio.to_thread(warming.wait)  # the pool is inside the next one's start
        assert not await settled(server, within_s=0.2)

        def gone(e: ev.WorkerDeregistered) -> bool:
            return e.worker_id == registered.worker_id

        closing = asyncio.create_task(close_server(server))
        # server.aclose() would leave LiveKit at once and cancel the warming thread's start
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(2):
                await standin.events.wait_for(ev.WorkerDeregistered, gone)
        async with asyncio.timeout(30):
            await asyncio.to_thread(warmed.set)
            await closing
            await standin.events.wait_for(ev.WorkerDeregistered, gone)
    finally:
        warmed.set()
        served.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await served
    assert await settled(server, within_s=0)
    for thread in job_threads() - before:
        await asyncio.to_thread(thread.join, 10)
        assert not thread.is_alive()


def test_the_framework_still_has_what_close_server_reads_and_sets() -> None:
    """``close_server`` reads and sets livekit-agents' private pool members: an upgrade that
    renames them fails here, not in a drain that hangs."""
    import inspect

    from livekit.agents.ipc.proc_pool import ProcPool

    main_task = inspect.getsource(ProcPool._main_task)
    assert "min(self._target_idle_processes, self._default_num_idle_processes)" in main_task
    assert "self._spawn_tasks.add(task)" in main_task
    assert "self._proc_pool = ipc.proc_pool.ProcPool(" in inspect.getsource(AgentServer.run)
