"""Whether LiveKit holds the worker is what its heartbeat says now (issue 14, item 7): a worker
whose agent socket is cut and kept down, or whose LiveKit side hangs, says no ``agent_name`` at
once (its heartbeats are an hour apart here: only the beat the change wakes can say it) and
answers its probe 503, and says its name again once it registers.

The first tests pin what ``pinecall_worker.link`` relies on in the installed livekit-agents."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import pytest
from livekit.agents import AgentServer, JobExecutorType
from livekit.agents import worker as framework

from pinecall_contracts.fleet import WorkerRow
from pinecall_loadlab.livekit import StandIn
from pinecall_loadlab.livekit import events as ev
from pinecall_loadlab.livekit.labagents import answer_and_hold
from pinecall_loadlab.livekit.testing import API_KEY, API_SECRET, LabWorkers
from pinecall_testkit.roster import Keys, Replica
from pinecall_worker.server import Worker
from pinecall_worker.settings import WorkerSettings


class Recorded(AgentServer):
    """An unmodified AgentServer that notes when ``_run_ws`` starts and how it ends."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.said: list[str] = []
        self.changed = asyncio.Event()
        self.on("worker_registered", lambda *_: self._say("registered"))

    def _say(self, what: str) -> None:
        self.said.append(what)
        self.changed.set()

    async def until(self, count: int) -> list[str]:
        while len(self.said) < count:
            self.changed.clear()
            await self.changed.wait()
        return self.said

    async def _run_ws(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self._say("serving")
        try:
            await super()._run_ws(ws)
        except Exception as exc:
            self._say(f"raised {type(exc).__name__}")
            raise
        self._say("returned")


async def test_livekit_agents_serves_a_registration_in_run_ws_and_reconnects_when_it_ends(
    standin: StandIn, lab_workers: LabWorkers
) -> None:
    """livekit-agents 1.8.9: ``worker_registered``, then ``_run_ws`` for as long as that
    connection serves; a dropped socket makes it raise, and the loop registers again."""
    server = Recorded(
        ws_url=standin.url,
        api_key=API_KEY,
        api_secret=API_SECRET,
        job_executor_type=JobExecutorType.THREAD,
        num_idle_processes=1,
        port=0,
    )
    server.rtc_session(answer_and_hold, agent_name="pin")
    await lab_workers.start(server)
    async with asyncio.timeout(30):
        await server.until(2)
        standin.cut_link("pin", 600)
        await server.until(3)
        await standin.events.wait_for(
            ev.LinkFaulted, lambda e: e.what == "refused"
        )  # it came back, and was turned away
        assert server.said == ["registered", "serving", "raised APIStatusError"]
        standin.mend_link("pin")
        await server.until(5)
    assert server.said[3:] == ["registered", "serving"]


def test_livekit_agents_notices_a_hung_server_only_by_aiohttps_heartbeat() -> None:
    """Why the worker pings LiveKit itself: 1.8.9 sends no ``WorkerPing``, and its socket's
    heartbeat (30 s without a byte, then 15 s for a pong) is its only watch on a hung server."""
    source = inspect.getsource(framework)
    assert "WorkerPing" not in source
    assert framework.HEARTBEAT_INTERVAL == 30
    assert "heartbeat=HEARTBEAT_INTERVAL" in inspect.getsource(AgentServer._connection_task)
    assert "await ws.receive()" in inspect.getsource(AgentServer._run_ws)


@pytest.fixture
async def worker(
    standin: StandIn, roster: Replica, keys: Keys, tmp_path: Path
) -> AsyncIterator[Worker]:
    settings = WorkerSettings.from_env(
        {},
        fleet="pinecall",
        fleet_key=keys.production,
        max_jobs=4,
        worker_host="worker-link",
        livekit_url=standin.url,
        livekit_api_key=API_KEY,
        livekit_api_secret=API_SECRET,
        heartbeat_s=3600,
        drain_timeout_s=3,
        seal_timeout_s=4,
        health_port=0,
        measures_socket=str(tmp_path / "measures.sock"),
    )
    w = Worker(
        settings,
        answer_and_hold,
        roster_transport=roster.transport,
        executor=JobExecutorType.THREAD,
        num_idle_processes=1,
        start=1791067258,
    )
    running = asyncio.create_task(w.run())
    yield w
    w.stop()
    async with asyncio.timeout(30):
        await running


async def roster_says(roster: Replica, holds: Any) -> WorkerRow:
    """The worker's row once the roster's view of it ``holds``."""
    view = roster.app.state.roster
    rows = lambda: view.view("pinecall").workers  # noqa: E731
    await view.changes.wait_for(lambda: any(holds(r) for r in rows()), timeout=60)
    [row] = rows()
    return row


async def readyz(worker: Worker) -> tuple[int, str]:
    await worker.health.listening.wait()
    async with httpx.AsyncClient() as http:
        r = await http.get(f"http://127.0.0.1:{worker.health.port}/readyz")
    return r.status_code, r.text


@pytest.mark.parametrize("fault", ["cut", "hang"])
async def test_a_worker_livekit_no_longer_holds_says_so_at_once_and_its_name_again_after(
    worker: Worker, standin: StandIn, roster: Replica, fault: str
) -> None:
    async with asyncio.timeout(60):
        await worker.registered.wait()
    await worker.heartbeat.beat()
    await roster_says(roster, lambda r: r.agent_name == worker.name)
    assert await readyz(worker) == (200, "ready")
    (standin.cut_link if fault == "cut" else standin.hang_link)(worker.name, 600)
    gone = await roster_says(roster, lambda r: r.agent_name is None)
    assert (gone.worker, gone.unregistered_s is not None) == (worker.name, True)
    assert await readyz(worker) == (503, "not registered with LiveKit")
    assert worker.link.lost == 1
    standin.mend_link(worker.name)
    back = await roster_says(roster, lambda r: r.agent_name == worker.name)
    assert back.unregistered_s is None
    assert await readyz(worker) == (200, "ready")
