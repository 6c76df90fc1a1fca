"""Unmodified livekit-agents workers for the lab's experiments and tests.

Entrypoints live in this importable module so the PROCESS executor's child processes can load
them. `lab_server` builds an `AgentServer` the way a deployment would, differing only in what the
experiment varies: its agent name, its seats and how it counts its load.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Callable
from typing import Any

from livekit.agents import AgentServer, JobContext, JobExecutorType

from pinecall_jobs.native import make_thread_safe
from pinecall_jobs.server import close_server
from pinecall_labroom.jobs import join_job_room
from pinecall_loadlab.livekit.server import StandIn


class LoadReport(enum.Enum):
    """How a lab worker turns its running calls into LiveKit's load."""

    CALLS_OVER_SEATS = "calls/seats"
    """``calls ÷ seats``: LiveKit's 0.7 load threshold stops it at 70 % of its seats."""
    COUNTED = "0.7*calls/seats"
    """``0.7 × calls ÷ seats``: full (0.7) exactly when every seat is taken."""


async def finish_at_once(ctx: JobContext) -> None:
    """A job that does its work without a room and ends itself: the worker reports JS_SUCCESS."""
    ctx.shutdown("lab job done")


async def answer_and_hold(ctx: JobContext) -> None:
    """A job that joins its lab room as the agent and stays until the job is ended."""
    await join_job_room(ctx)


def lab_server(
    url: str,
    api_key: str,
    api_secret: str,
    *,
    agent_name: str,
    seats: int = 8,
    report: LoadReport = LoadReport.COUNTED,
    executor: JobExecutorType = JobExecutorType.THREAD,
    hold: bool = True,
    num_idle_processes: int = 1,
    load: Callable[[AgentServer], float] | None = None,
) -> AgentServer:
    """An `AgentServer` on the stand-in at `url` with one `rtc_session` named `agent_name`.

    Its load is its running jobs counted against `seats` as `report` says; it runs in production
    mode when started with ``run(devmode=False)`` (the framework's own 0.7 `load_threshold`).
    `hold` picks `answer_and_hold` (True) or `finish_at_once` (False) as the entrypoint; `load`
    replaces the counted load altogether.
    """
    factor = 0.7 if report is LoadReport.COUNTED else 1.0

    def counted(server: AgentServer) -> float:
        return factor * len(server.active_jobs) / seats

    if executor is JobExecutorType.THREAD:
        make_thread_safe()
    server = AgentServer(
        ws_url=url,
        api_key=api_key,
        api_secret=api_secret,
        job_executor_type=executor,
        load_fnc=load or counted,
        num_idle_processes=num_idle_processes,
        port=0,
        max_retry=0,
    )
    server.rtc_session(answer_and_hold if hold else finish_at_once, agent_name=agent_name)
    return server


class LabWorkers:
    """Starts lab workers on a stand-in and closes them all at the end."""

    def __init__(self, lk: StandIn, api_key: str, api_secret: str) -> None:
        self.lk = lk
        self.api_key, self.api_secret = api_key, api_secret
        self._running: list[tuple[AgentServer, asyncio.Task[None]]] = []

    async def start(self, server: AgentServer | None = None, **kwargs: Any) -> str:
        """Run `server` (or ``lab_server(**kwargs)`` on this stand-in) in production mode and
        return its worker id once the stand-in registered it."""
        if server is None:
            server = lab_server(self.lk.url, self.api_key, self.api_secret, **kwargs)
        registered: asyncio.Future[str] = asyncio.get_running_loop().create_future()

        def on_registered(worker_id: str, _info: Any) -> None:
            if not registered.done():
                registered.set_result(worker_id)

        server.on("worker_registered", on_registered)
        task = asyncio.create_task(server.run(devmode=False))
        self._running.append((server, task))
        waits: set[asyncio.Future[Any]] = {registered, task}
        done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        if registered not in done:
            await task  # raises why the worker could not run
        return registered.result()

    async def aclose(self) -> None:
        for server, task in reversed(self._running):
            await close_server(server)
            await asyncio.gather(task, return_exceptions=True)
