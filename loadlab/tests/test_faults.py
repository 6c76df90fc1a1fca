"""Faults on command: the control API, a cut connection, a slow worker."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest
from livekit import api
from livekit.agents import AgentServer, JobExecutorType
from livekit.protocol import agent, models

from pinecall_loadlab.livekit import StandIn
from pinecall_loadlab.livekit import events as ev
from pinecall_loadlab.livekit.dispatcher import AGENT_LEFT_ROOM
from pinecall_loadlab.livekit.labagents import answer_and_hold
from pinecall_loadlab.livekit.testing import API_KEY, API_SECRET, LabWorkers

AGENT = models.ParticipantInfo.Kind.AGENT


async def test_control_api_lists_freezes_and_thaws_workers(
    standin: StandIn, lab_workers: LabWorkers
) -> None:
    worker = await lab_workers.start(agent_name="exp")
    token = api.AccessToken(API_KEY, API_SECRET).to_jwt()
    auth = {"Authorization": f"Bearer {token}"}
    base = f"{standin.url}/lab/control"
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{base}/workers") as r:
            assert r.status == 401
        async with http.post(f"{base}/workers/{worker}/freeze", headers=auth) as r:
            assert r.status == 200
        async with http.get(f"{base}/workers", headers=auth) as r:
            [listed] = await r.json()
        assert (listed["id"], listed["agent_name"], listed["frozen"]) == (worker, "exp", True)
        async with http.post(f"{base}/workers/{worker}/thaw", headers=auth) as r:
            assert r.status == 200
        assert not standin.worker(worker).frozen
        async with http.post(f"{base}/workers/AW_nobody/freeze", headers=auth) as r:
            assert r.status == 404
        lose = {"call-1": ["room_finished", "participant_left"]}
        async with http.post(
            f"{base}/webhooks/faults",
            headers=auth,
            json={"drop_next": 2, "delay_s": 0.5, "lose": lose},
        ) as r:
            answer = await r.json()
        assert (answer["drop_next"], answer["lose"]) == (2, {"call-1": sorted(lose["call-1"])})
        f = standin.webhooks.faults
        assert (f.drop_next, f.delay_s, f.lose) == (2, 0.5, {"call-1": set(lose["call-1"])})
        lkapi = api.LiveKitAPI(standin.url, API_KEY, API_SECRET)
        made = await lkapi.agent_dispatch.create_dispatch(
            api.CreateAgentDispatchRequest(room="timed", agent_name="nobody")
        )
        await lkapi.aclose()
        async with http.get(f"{base}/dispatches", headers=auth) as r:
            [listed] = await r.json()
        assert (listed["room"], listed["dispatch_id"], listed["agent_name"]) == (
            "timed",
            made.id,
            "nobody",
        )
        assert listed["at"] > 0


async def test_an_agent_whose_connection_is_cut_ends_its_job_failed(
    standin: StandIn, lab_workers: LabWorkers, livekit_api: api.LiveKitAPI
) -> None:
    """The worker's agent loses its room connection without a goodbye: CONNECTION_TIMEOUT after
    the cleanup timer, then LiveKit ends the job JS_FAILED and sends JobTermination."""
    standin.config.connection_timeout_s = 0.2  # LiveKit's is 5 s; the order is what matters here
    worker = await lab_workers.start(agent_name="exp", hold=True)
    await livekit_api.agent_dispatch.create_dispatch(
        api.CreateAgentDispatchRequest(agent_name="exp", room="call-1")
    )
    async with asyncio.timeout(30):
        [joined] = await standin.events.wait_for(ev.ParticipantJoined, lambda e: e.kind == AGENT)
        standin.cut("call-1", joined.identity)
        [left] = await standin.events.wait_for(
            ev.ParticipantLeft, lambda e: e.identity == joined.identity
        )
        [failed] = await standin.events.wait_for(
            ev.JobStatusChanged, lambda e: e.status == agent.JobStatus.JS_FAILED
        )
    assert left.reason == models.DisconnectReason.CONNECTION_TIMEOUT
    assert (failed.worker_id, failed.error) == (worker, AGENT_LEFT_ROOM)


@pytest.mark.parametrize(("late_by", "outcome"), [("within", "assigned"), ("past", "timeout")])
async def test_a_slow_worker_answers_late_and_past_the_deadline_loses_the_job(
    standin: StandIn,
    lab_workers: LabWorkers,
    livekit_api: api.LiveKitAPI,
    late_by: str,
    outcome: str,
) -> None:
    """An answer held 0.3 s still takes the job; one held past the offer deadline finds the offer
    gone: LiveKit drops it with no retry (``shared/reference/livekit-protocol.md`` §2.4)."""
    worker = await lab_workers.start(agent_name="exp", hold=False)
    deadline = standin.config.offer_deadline_s
    standin.slow(worker, 0.3 if late_by == "within" else deadline + 0.5)
    d = await livekit_api.agent_dispatch.create_dispatch(
        api.CreateAgentDispatchRequest(agent_name="exp", room="call-1")
    )
    async with asyncio.timeout(30):
        [ended] = await standin.events.wait_for(ev.JobRequestEnded, lambda e: e.dispatch_id == d.id)
    assert ended.outcome == outcome


def unmodified_server(standin: StandIn, agent_name: str) -> AgentServer:
    """An unmodified livekit-agents worker with the framework's own reconnects (16 retries)."""
    server = AgentServer(
        ws_url=standin.url,
        api_key=API_KEY,
        api_secret=API_SECRET,
        job_executor_type=JobExecutorType.THREAD,
        num_idle_processes=1,
        port=0,
    )
    server.rtc_session(answer_and_hold, agent_name=agent_name)
    return server


async def test_a_cut_link_is_refused_until_it_lifts_then_registers_again(
    standin: StandIn, lab_workers: LabWorkers
) -> None:
    """The worker's socket is dropped and each reconnect turned away (the framework retries at
    once, its retry count restarted by the upgrade), until the fault lifts: then it registers
    under a new id. The control API refuses what it cannot do."""
    first = await lab_workers.start(unmodified_server(standin, "exp"))
    auth = {"Authorization": f"Bearer {api.AccessToken(API_KEY, API_SECRET).to_jwt()}"}
    base = f"{standin.url}/lab/control/links"
    async with aiohttp.ClientSession(headers=auth) as http:
        for body, status in [
            ({"agent_name": "exp"}, 400),  # no seconds
            ({"agent_name": "exp", "for_s": 0}, 400),
            ({"for_s": 5}, 400),  # nobody named
            ({"agent_name": "nobody", "for_s": 5}, 404),
        ]:
            async with http.post(f"{base}/cut", json=body) as r:
                assert r.status == status, body
        async with http.post(f"{base}/mend", json={"agent_name": "exp"}) as r:
            assert r.status == 404  # no fault stands
        async with http.post(f"{base}/cut", json={"agent_name": "exp", "for_s": 600}) as r:
            assert (r.status, await r.json()) == (
                200,
                {"agent_name": "exp", "fault": "cut", "for_s": 600.0},
            )
        async with asyncio.timeout(30):
            await standin.events.wait_for(ev.WorkerDeregistered, lambda e: e.worker_id == first)
            await standin.events.wait_for(
                ev.LinkFaulted, lambda e: e.agent_name == "exp" and e.what == "refused", count=2
            )
        assert [e.worker_id for e in standin.events.of(ev.WorkerRegistered)] == [first]
        async with http.post(f"{base}/mend", json={"agent_name": "exp"}) as r:
            assert r.status == 200
        async with asyncio.timeout(30):
            registered = await standin.events.wait_for(ev.WorkerRegistered, count=2)
    assert (registered[1].agent_name, registered[1].worker_id != first) == ("exp", True)
    assert standin.agent_socket.faults == {}


async def test_a_hung_link_delivers_no_offer_and_holds_a_new_register_until_it_lifts(
    standin: StandIn, lab_workers: LabWorkers, livekit_api: api.LiveKitAPI
) -> None:
    """LiveKit's side hung: the worker stays listed, but an offer to it never reaches it (the
    job request times out), and a second worker of that name is held at its register, answered
    only once the hang lifts."""
    hung = await lab_workers.start(unmodified_server(standin, "exp"))
    standin.hang_link("exp", 600)
    d = await livekit_api.agent_dispatch.create_dispatch(
        api.CreateAgentDispatchRequest(agent_name="exp", room="call-1")
    )
    second = asyncio.create_task(lab_workers.start(unmodified_server(standin, "exp")))
    async with asyncio.timeout(30):
        [ended] = await standin.events.wait_for(ev.JobRequestEnded, lambda e: e.dispatch_id == d.id)
        await standin.events.wait_for(
            ev.LinkFaulted, lambda e: e.agent_name == "exp" and e.what == "held"
        )
        standin.mend_link("exp")
        again = await second
    assert (ended.outcome, ended.worker_id) == ("timeout", hung)
    assert standin.worker(hung).agent_name == "exp"  # still listed: LiveKit read no failure
    assert [e.what for e in standin.events.of(ev.LinkFaulted)] == ["hung", "held", "lifted"]
    events = standin.events.events
    [lifted] = [i for i, e in enumerate(events) if getattr(e, "what", None) == "lifted"]
    [registered] = [
        i
        for i, e in enumerate(events)
        if isinstance(e, ev.WorkerRegistered) and e.worker_id == again
    ]
    assert registered > lifted  # answered only once the hang lifted
