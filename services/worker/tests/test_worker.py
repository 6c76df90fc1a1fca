"""An unmodified livekit-agents AgentServer as our worker, on the LiveKit stand-in, heard by a
real roster (issue 6, acceptance 2 and 5's cordon)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from livekit import api
from livekit.agents import JobExecutorType
from livekit.protocol import agent, models

from pinecall_contracts.worker import CallEnded
from pinecall_loadlab.livekit import StandIn
from pinecall_loadlab.livekit import events as ev
from pinecall_loadlab.livekit.labagents import answer_and_hold
from pinecall_loadlab.livekit.testing import API_KEY, API_SECRET
from pinecall_loadlab.scenarios.livekit_choosing import place_calls
from pinecall_servicekit.lifecycle import ExitCode
from pinecall_testkit.roster import Keys, Replica, bearer
from pinecall_worker.measures import report
from pinecall_worker.server import Worker
from pinecall_worker.settings import WorkerSettings

AGENT = models.ParticipantInfo.Kind.AGENT


@pytest.fixture
def worker_settings(standin: StandIn, keys: Keys, tmp_path) -> WorkerSettings:  # type: ignore[no-untyped-def]
    return WorkerSettings.from_env(
        {},
        fleet="pinecall",
        fleet_key=keys.production,
        max_jobs=4,
        worker_host="worker-t",
        livekit_url=standin.url,
        livekit_api_key=API_KEY,
        livekit_api_secret=API_SECRET,
        heartbeat_s=3600,
        drain_timeout_s=3,
        seal_timeout_s=4,  # its jobs hold no call on a log: the seal has nobody to ask
        health_port=0,
        measures_socket=str(tmp_path / "measures.sock"),
    )


@pytest.fixture
async def worker(worker_settings: WorkerSettings, roster: Replica) -> AsyncIterator[Worker]:
    w = Worker(
        worker_settings,
        answer_and_hold,
        roster_transport=roster.transport,
        executor=JobExecutorType.THREAD,
        num_idle_processes=1,
        start=1791067258,
    )
    running = asyncio.create_task(w.run())
    w.exit = running  # type: ignore[attr-defined]
    async with asyncio.timeout(60):
        await w.registered.wait()
    yield w
    if not running.done():
        w.stop()
        async with asyncio.timeout(30):
            await running


async def roster_row(roster: Replica, keys: Keys) -> dict:  # type: ignore[type-arg]
    snapshot = (
        await roster.get(
            "/v1/ops/fleet", params={"fleet": "pinecall"}, headers=bearer(keys.operator)
        )
    ).json()
    [row] = snapshot["fleets"][0]["workers"]
    return row  # type: ignore[no-any-return]


async def livekit_heard(standin: StandIn, worker: Worker, active: int) -> None:
    """Wait until the stand-in heard ``worker`` say it is available with ``active`` calls of
    the jobs it runs now (the worker says it when a seat frees, not at the 2.5 s tick)."""
    [registered] = standin.events.of(ev.WorkerRegistered, lambda e: e.agent_name == worker.name)
    load = round(worker.load_threshold * active / worker.seats, 6)
    jobs = len(worker.server.active_jobs)
    async with asyncio.timeout(10):
        await standin.events.wait_for(
            ev.WorkerStatusReported,
            lambda e: (
                e.worker_id == registered.worker_id
                and e.status == agent.WorkerStatus.WS_AVAILABLE
                and round(e.load, 6) == load
                and e.job_count == jobs
            ),
        )


async def test_four_seats_take_four_calls_on_both_scales_and_the_fifth_is_declined(
    worker: Worker, standin: StandIn, livekit_api: api.LiveKitAPI, roster: Replica, keys: Keys
) -> None:
    async with asyncio.timeout(60):
        calls = await place_calls(
            standin, livekit_api, agent_name=worker.name, calls=5, interval_s=0
        )
    assert [c.answered for c in calls] == [True, True, True, True, False]
    # to LiveKit: only ever 0.7 × calls ÷ 4, and the load threshold exactly at the 4th call
    [registered] = standin.events.of(ev.WorkerRegistered, lambda e: e.agent_name == worker.name)
    reports = standin.events.of(
        ev.WorkerStatusReported, lambda e: e.worker_id == registered.worker_id
    )
    allowed = {round(worker.load_threshold * k / 4, 6) for k in range(5)}
    assert {round(r.load, 6) for r in reports} <= allowed
    async with asyncio.timeout(10):
        await standin.events.wait_for(
            ev.WorkerStatusReported,
            lambda e: (
                e.worker_id == registered.worker_id and round(e.load, 6) == worker.load_threshold
            ),
        )
    # to the roster: calls ÷ seats, full at 1.0, under its LiveKit name
    await worker.heartbeat.beat()
    row = await roster_row(roster, keys)
    assert (
        row["worker"],
        row["agent_name"],
        row["active"],
        row["seats"],
        row["load"],
        row["state"],
    ) == (worker.name, worker.name, 4, 4, 1.0, "full")


async def test_a_job_whose_call_ended_holds_no_seat_while_it_closes(
    worker: Worker, standin: StandIn, livekit_api: api.LiveKitAPI
) -> None:
    """The dispatcher frees a seat on ``call.ended``; the job may still be closing (sealing,
    its process exiting). Its worker takes the next call meanwhile instead of declining it at
    LiveKit's load threshold, which would leave that caller waiting for the re-offer."""
    async with asyncio.timeout(60):
        calls = await place_calls(
            standin, livekit_api, agent_name=worker.name, calls=4, interval_s=0
        )
    assert all(c.answered for c in calls)
    # the first job says its call ended, as a job does once the end is on the log; the
    # job itself is still running (it holds its room until the room goes)
    first = worker.jobs.calls()[0]
    worker.measures.arrived.clear()
    report(worker.measures.path, CallEnded(call=first.offer.call, outcome="completed"))
    async with asyncio.timeout(10):
        await worker.measures.arrived.wait()
    assert (len(worker.server.active_jobs), worker.active) == (4, 3)
    # the dispatcher offers the seat once the roster counts it free, after LiveKit heard it
    await livekit_heard(standin, worker, 3)
    await livekit_api.room.create_room(
        api.CreateRoomRequest(name="next", agents=[api.RoomAgentDispatch(agent_name=worker.name)])
    )
    async with asyncio.timeout(60):
        [next_call] = await standin.events.wait_for(ev.JobRequestEnded, lambda e: e.room == "next")
    assert next_call.outcome == "assigned"
    async with asyncio.timeout(30):  # its job launched: its agent is in the room
        await standin.events.wait_for(
            ev.ParticipantJoined, lambda e: e.room == "next" and e.kind == AGENT
        )
    assert (len(worker.server.active_jobs), worker.active) == (5, 4)


async def test_a_cordon_in_a_heartbeat_answer_drains_and_exits_3(
    worker: Worker, standin: StandIn, livekit_api: api.LiveKitAPI, roster: Replica, keys: Keys
) -> None:
    async with asyncio.timeout(60):
        [call] = await place_calls(
            standin, livekit_api, agent_name=worker.name, calls=1, interval_s=0
        )
    assert call.answered
    r = await roster.post("/v1/ops/fleet/pinecall/worker-t/cordon", headers=bearer(keys.operator))
    assert r.status_code == 200
    await worker.heartbeat.beat()
    assert worker.cordoned
    # it holds its call; a new one is declined while it drains
    await livekit_api.room.create_room(
        api.CreateRoomRequest(name="late", agents=[api.RoomAgentDispatch(agent_name=worker.name)])
    )
    async with asyncio.timeout(60):
        [late] = await standin.events.wait_for(ev.JobRequestEnded, lambda e: e.room == "late")
    assert late.outcome != "assigned"
    assert not worker.exit.done()  # type: ignore[attr-defined]
    await livekit_api.room.delete_room(api.DeleteRoomRequest(room=call.room))  # the call ends
    async with asyncio.timeout(30):
        code = await worker.exit  # type: ignore[attr-defined]
    assert code == ExitCode.CORDONED
    assert (await roster_row(roster, keys))["state"] == "cordoned"


async def test_sigterm_drains_takes_no_new_call_and_exits_0_once_its_calls_end(
    worker: Worker, standin: StandIn, livekit_api: api.LiveKitAPI, roster: Replica, keys: Keys
) -> None:
    async with asyncio.timeout(60):
        [call] = await place_calls(
            standin, livekit_api, agent_name=worker.name, calls=1, interval_s=0
        )
    assert call.answered
    worker.stop()  # what SIGTERM does
    async with asyncio.timeout(10):
        await roster.app.state.roster.changes.wait_for(
            lambda: bool((v := roster.app.state.roster.view("pinecall").workers) and v[0].draining),
            timeout=10,
        )
    await livekit_api.room.create_room(
        api.CreateRoomRequest(
            name="after-term", agents=[api.RoomAgentDispatch(agent_name=worker.name)]
        )
    )
    async with asyncio.timeout(60):
        [late] = await standin.events.wait_for(ev.JobRequestEnded, lambda e: e.room == "after-term")
    assert late.outcome != "assigned"
    assert not worker.exit.done()  # type: ignore[attr-defined]  # its call still holds it
    await livekit_api.room.delete_room(api.DeleteRoomRequest(room=call.room))
    async with asyncio.timeout(30):
        assert await worker.exit == ExitCode.OK  # type: ignore[attr-defined]
    assert (await roster_row(roster, keys))["state"] == "draining"


async def test_a_calls_end_frees_its_seat_on_the_roster_and_at_livekit_at_once(
    worker: Worker, standin: StandIn, livekit_api: api.LiveKitAPI, roster: Replica, keys: Keys
) -> None:
    """A full worker whose call ends: the roster counts the seat free at once (its heartbeat
    is an hour away here), and LiveKit heard the worker's status before the roster did, so the
    offer the dispatcher makes of that seat gets its job (issue 14, item 5)."""
    service = roster.app.state.roster  # type: ignore[attr-defined]

    async def roster_counts(active: int) -> None:
        await service.changes.wait_for(
            lambda: any(
                w.worker == worker.name and w.active == active
                for w in service.view("pinecall").workers
            ),
            timeout=30,
        )

    async with asyncio.timeout(60):
        calls = await place_calls(
            standin, livekit_api, agent_name=worker.name, calls=4, interval_s=0
        )
        assert all(c.answered for c in calls)
        await roster_counts(4)
        first = worker.jobs.calls()[0]
        report(worker.measures.path, CallEnded(call=first.offer.call, outcome="completed"))
        await roster_counts(3)
    await livekit_heard(standin, worker, 3)
    await livekit_api.room.create_room(
        api.CreateRoomRequest(name="next", agents=[api.RoomAgentDispatch(agent_name=worker.name)])
    )
    async with asyncio.timeout(60):
        [next_call] = await standin.events.wait_for(ev.JobRequestEnded, lambda e: e.room == "next")
    assert next_call.outcome == "assigned"
