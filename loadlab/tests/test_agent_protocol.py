"""Acceptance 1: unmodified livekit-agents workers on the stand-in's agent WebSocket."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest
from livekit import api
from livekit.agents import AgentServer, JobExecutorType
from livekit.protocol import agent, models

from pinecall_loadlab.livekit import StandIn
from pinecall_loadlab.livekit import events as ev
from pinecall_loadlab.livekit.testing import API_KEY, API_SECRET, LabWorkers


@pytest.mark.parametrize("executor", [JobExecutorType.THREAD, JobExecutorType.PROCESS])
async def test_worker_registers_reports_load_and_runs_a_dispatched_job(
    standin: StandIn,
    lab_workers: LabWorkers,
    livekit_api: api.LiveKitAPI,
    executor: JobExecutorType,
) -> None:
    name = f"exp-{executor.value}"
    worker_id = await lab_workers.start(agent_name=name, hold=False, executor=executor)
    async with asyncio.timeout(60):
        [status] = await standin.events.wait_for(
            ev.WorkerStatusReported, lambda e: e.worker_id == worker_id
        )
        assert (status.status, status.load) == (agent.WorkerStatus.WS_AVAILABLE, 0.0)

        d = await livekit_api.agent_dispatch.create_dispatch(
            api.CreateAgentDispatchRequest(agent_name=name, room="call-1")
        )
        [ended] = await standin.events.wait_for(ev.JobRequestEnded, lambda e: e.dispatch_id == d.id)
        assert (ended.outcome, ended.worker_id) == ("assigned", worker_id)
        statuses = await standin.events.wait_for(
            ev.JobStatusChanged, lambda e: e.job_id == ended.job_id, count=2
        )
    assert [s.status for s in statuses] == [agent.JobStatus.JS_RUNNING, agent.JobStatus.JS_SUCCESS]
    listed = {x.agent_name: x for x in await livekit_api.agent_dispatch.list_dispatch("call-1")}
    [job] = listed[name].state.jobs
    assert (job.state.status, job.state.worker_id) == (agent.JobStatus.JS_SUCCESS, worker_id)
    assert job.state.participant_identity == f"agent-{job.id}"
    # CreateDispatch auto-created the room, and with it the automatic dispatch (agent name ""),
    # which no worker holds: it stays pending, with no job.
    assert list(listed[""].state.jobs) == []


async def test_a_worker_at_its_threshold_declines_and_the_next_is_tried_never_again(
    standin: StandIn, lab_workers: LabWorkers, livekit_api: api.LiveKitAPI
) -> None:
    loads = {"full": 0.0, "free": 0.0}

    def load_of(name: str) -> object:
        return lambda _server: loads[name]

    full = await lab_workers.start(agent_name="exp", load=load_of("full"))
    free = await lab_workers.start(agent_name="exp", load=load_of("free"))
    async with asyncio.timeout(30):
        # Right after `full` said WS_AVAILABLE the stand-in keeps believing it for a 2.5 s tick;
        # its own load_fnc, sampled before it answers, says it is at the 0.7 load threshold.
        await standin.events.wait_for(ev.WorkerStatusReported, lambda e: e.worker_id == free)
        await standin.events.wait_for(ev.WorkerStatusReported, lambda e: e.worker_id == full)
        loads["full"] = 0.7
        d = await livekit_api.agent_dispatch.create_dispatch(
            api.CreateAgentDispatchRequest(agent_name="exp", room="call-1")
        )
        [ended] = await standin.events.wait_for(ev.JobRequestEnded, lambda e: e.dispatch_id == d.id)
    offers = [
        (e.worker_id, a.answer)
        for e in standin.events.of(ev.JobOffered)
        for a in standin.events.of(ev.OfferAnswered)
        if a.job_id == e.job_id == ended.job_id and a.worker_id == e.worker_id
    ]
    # seed 7 draws `full` first (weights 1 and 1, registration order)
    assert offers == [(full, "declined"), (free, "accepted")]
    assert (ended.outcome, ended.worker_id) == ("assigned", free)


async def test_when_every_worker_declines_the_job_is_lost_for_good(
    standin: StandIn, lab_workers: LabWorkers, livekit_api: api.LiveKitAPI
) -> None:
    load = {"now": 0.0}
    worker = await lab_workers.start(agent_name="exp", load=lambda _s: load["now"])
    async with asyncio.timeout(30):
        await standin.events.wait_for(ev.WorkerStatusReported, lambda e: e.worker_id == worker)
        load["now"] = 0.9
        d = await livekit_api.agent_dispatch.create_dispatch(
            api.CreateAgentDispatchRequest(agent_name="exp", room="call-1")
        )
        [ended] = await standin.events.wait_for(ev.JobRequestEnded, lambda e: e.dispatch_id == d.id)
        assert ended.outcome == "exhausted"
        # The worker has room again and says so; nothing re-offers the lost job.
        load["now"] = 0.0
        seen = len(standin.events.of(ev.WorkerStatusReported, lambda e: e.worker_id == worker))
        await standin.events.wait_for(
            ev.WorkerStatusReported,
            lambda e: e.worker_id == worker and e.status == agent.WorkerStatus.WS_AVAILABLE,
            count=seen + 1,
        )
    assert len(standin.events.of(ev.JobOffered, lambda e: e.job_id == ended.job_id)) == 1
    [listed] = [x for x in await livekit_api.agent_dispatch.list_dispatch("call-1") if x.id == d.id]
    assert list(listed.state.jobs) == []


async def test_a_dispatch_to_a_name_no_worker_holds_stays_pending(
    standin: StandIn, lab_workers: LabWorkers, livekit_api: api.LiveKitAPI
) -> None:
    d = await livekit_api.agent_dispatch.create_dispatch(
        api.CreateAgentDispatchRequest(agent_name="fleet", room="sip-call")
    )
    async with asyncio.timeout(30):
        [ended] = await standin.events.wait_for(ev.JobRequestEnded, lambda e: e.dispatch_id == d.id)
        assert ended.outcome == "no_worker"
        # A worker holding that name registers later: nothing retries the dispatch.
        await lab_workers.start(agent_name="fleet")
    assert len(standin.events.of(ev.JobOffered)) == 0
    [listed] = [
        x for x in await livekit_api.agent_dispatch.list_dispatch("sip-call") if x.id == d.id
    ]
    assert list(listed.state.jobs) == []


async def test_terminate_true_ends_the_job_without_an_agent(
    standin: StandIn, lab_workers: LabWorkers, livekit_api: api.LiveKitAPI
) -> None:
    server = AgentServer(
        ws_url=standin.url,
        api_key=lab_workers.api_key,
        api_secret=lab_workers.api_secret,
        port=0,
        num_idle_processes=0,
        job_executor_type=JobExecutorType.THREAD,
        load_fnc=lambda: 0.0,
    )

    async def entry(_ctx: object) -> None:  # never runs: every request is rejected
        raise AssertionError

    async def reject(req: object) -> None:
        await req.reject(terminate=True)  # type: ignore[attr-defined]

    server.rtc_session(entry, agent_name="refuser", on_request=reject)
    await lab_workers.start(server)
    d = await livekit_api.agent_dispatch.create_dispatch(
        api.CreateAgentDispatchRequest(agent_name="refuser", room="call-1")
    )
    async with asyncio.timeout(30):
        [ended] = await standin.events.wait_for(ev.JobRequestEnded, lambda e: e.dispatch_id == d.id)
    assert ended.outcome == "terminated"
    [listed] = [x for x in await livekit_api.agent_dispatch.list_dispatch("call-1") if x.id == d.id]
    assert [j.state.status for j in listed.state.jobs] == [agent.JobStatus.JS_SUCCESS]
    assert len(standin.events.of(ev.JobOffered)) == 1


async def test_delete_dispatch_terminates_the_running_job(
    standin: StandIn, lab_workers: LabWorkers, livekit_api: api.LiveKitAPI
) -> None:
    worker = await lab_workers.start(agent_name="exp", hold=True)
    d = await livekit_api.agent_dispatch.create_dispatch(
        api.CreateAgentDispatchRequest(agent_name="exp", room="call-1")
    )
    async with asyncio.timeout(30):
        [ended] = await standin.events.wait_for(ev.JobRequestEnded, lambda e: e.dispatch_id == d.id)
        await standin.events.wait_for(
            ev.JobStatusChanged,
            lambda e: e.job_id == ended.job_id and e.status == agent.JobStatus.JS_RUNNING,
        )
        [joined] = await standin.events.wait_for(
            ev.ParticipantJoined, lambda e: e.kind == models.ParticipantInfo.Kind.AGENT
        )
        # The agent joined with the token the stand-in minted, as `BuildAgentToken` mints it.
        [who] = (
            await livekit_api.room.list_participants(api.ListParticipantsRequest(room="call-1"))
        ).participants
        assert (who.identity, who.kind) == (f"agent-{ended.job_id}", models.ParticipantInfo.AGENT)
        assert dict(who.attributes) == {"lk.agent.name": "exp", "lk.agent_name": "exp"}
        assert who.permission.agent
        await livekit_api.agent_dispatch.delete_dispatch(d.id, "call-1")
        # JobTermination reached the worker: it closed the job, whose agent left the lab room.
        [left] = await standin.events.wait_for(
            ev.ParticipantLeft, lambda e: e.identity == joined.identity
        )
    assert ended.worker_id == worker
    assert left.reason == models.DisconnectReason.CLIENT_INITIATED
    job = standin.dispatcher.jobs[ended.job_id]
    assert job.state.status == agent.JobStatus.JS_SUCCESS  # requested, not "agent left"


async def test_agent_socket_refusals(standin: StandIn) -> None:
    """Not an upgrade: 404. No token, or a token without ``video.agent``: 401 plain text."""
    no_agent = api.AccessToken(API_KEY, API_SECRET).with_grants(api.VideoGrants()).to_jwt()
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{standin.url}/agent") as r:
            assert r.status == 404
        for headers in ({}, {"Authorization": f"Bearer {no_agent}"}):
            with pytest.raises(aiohttp.WSServerHandshakeError) as err:
                await http.ws_connect(f"{standin.url}/agent", headers=headers)
            assert err.value.status == 401


async def test_a_socket_that_does_not_register_in_time_is_closed(standin: StandIn) -> None:
    standin.config.register_timeout_s = 0.1
    token = api.AccessToken(API_KEY, API_SECRET).with_grants(api.VideoGrants(agent=True)).to_jwt()
    async with (
        aiohttp.ClientSession() as http,
        http.ws_connect(f"{standin.url}/agent", headers={"Authorization": f"Bearer {token}"}) as ws,
    ):
        async with asyncio.timeout(10):
            msg = await ws.receive()
    assert msg.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)
    assert standin.dispatcher.registry.all() == []
