"""A full fleet's phone caller called back (issue 18, acceptance 3, end to end): a number put with
``/v1/phone-numbers`` rings the agent through the stand-in's LiveKit SIP; the fleet's one worker
(a real worker process, the real call on the vendor fakes) holds its one seat with a first
caller; a second caller is given to the real overflow (``pinecall_overflow``, in this process,
its jobs in threads) and hears its sentence, and ``callback.requested`` lands on the agent's log
with the caller's number; once the first caller hangs up and a seat frees, the dispatcher's
follow-ups dial the second caller back as an outbound call of the agent through the worker's SIP
leg (``CreateSIPParticipant`` on the stand-in). The phone is busy at first: the try ends
``not_reached`` and its ``callback.not_reached`` carries the leg's SIP status as the call's own
log says it (486 Busy Here); the next try, a retry later, is answered, the callee hears the
agent's greeting first, and the follow-up ends answered, each try dialled once.

Every wait is on an event: the stand-in's (dispatches, SIP legs), call-log's on NATS (opened,
ended, sealed), the dialler's (a try's outcome applied).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from livekit import api

from pinecall_clients.calllog import CallLogClient
from pinecall_contracts.agents import AgentDefinition
from pinecall_contracts.base import decode
from pinecall_contracts.dispatch import JobOffer
from pinecall_dispatcher.store.tables import FOLLOWUP_TRIES, FOLLOWUPS
from pinecall_labroom import LabRoom
from pinecall_loadlab.livekit import StandIn, StandInConfig
from pinecall_loadlab.livekit import events as ev
from pinecall_loadlab.livekit.callers import LAB_AGENT, LAB_ORG, dial
from pinecall_loadlab.livekit.sip.legs import Callee
from pinecall_loadlab.livekit.sip.store import normalize
from pinecall_loadlab.livekit.testing import API_KEY, API_SECRET
from pinecall_loadlab.scenarios.chain import Chain, ChainConfig, chain_call_log, runtime_chain
from pinecall_loadlab.scenarios.labworkers import start_process
from pinecall_loadlab.vendors import VendorFakes
from pinecall_loadlab.vendors.testing import *  # noqa: F403  (the vendor fakes)
from pinecall_overflow.server import Overflow
from pinecall_overflow.settings import OverflowSettings
from pinecall_servicekit.testing.apps import Replica
from pinecall_testkit.call_log import Keys, bearer
from pinecall_testkit.worker import CallEvents

# a worker process and its job process start: scheduled first (long). 600 s, past the test's own
# waits (300 s for the call back, after the overflow's 60 s to register and before its 60 s to
# stop): at pytest-timeout's 300 s (pyproject.toml) its thread method would end the xdist worker
# with os._exit before asyncio.timeout could fail the test with what it was waiting for
pytestmark = [pytest.mark.long, pytest.mark.timeout(600)]

NUMBER = "+15550142"
"""The agent's number, put with ``/v1/phone-numbers``."""
FIRST, SECOND = "+14155550101", "+14155550102"
"""The callers: the first takes the one seat, the second is overflowed and called back."""
GREETING = "Hello, this is the lab calling you back."
SAYS = "Sorry, we are full; we will call you back."


@pytest.fixture
def standin_config(standin_config: StandInConfig) -> StandInConfig:
    return dataclasses.replace(standin_config, connection_timeout_s=1.0)


@pytest.fixture
def dispatcher_numbers() -> dict[str, Any]:
    """A re-offer in 90 s (a worker process's first job waits for its job process to start:
    tens of seconds on a shared machine; a re-offer would only make offers to count); the
    dialler's round every second (it dials when the seat frees, not 5 s later); a try not
    reached tried again 2 s later (the test makes the phone answer first, on the event of the
    try's outcome applied: a round is a second away at the soonest)."""
    return {
        "heard_s": 6.0,
        "reoffer_s": 90.0,
        "fleet_wait_s": 4.0,
        "sweep_s": 0.5,
        "followup_every_s": 1.0,
        "followup_retry_s": 2.0,
    }


@pytest.fixture
async def call_log(chain_config: ChainConfig) -> AsyncIterator[Replica]:
    async with chain_call_log(chain_config) as replica:
        yield replica


@pytest.fixture
async def chain(
    standin: StandIn, chain_config: ChainConfig, call_log: Replica
) -> AsyncIterator[Chain]:
    async with runtime_chain(standin, chain_config, call_log=call_log) as c:
        yield c


@pytest.fixture
async def call_events(chain_config: ChainConfig) -> AsyncIterator[CallEvents]:
    async with CallEvents.listening(chain_config.nats_url, chain_config.namespace) as events:
        yield events


@contextlib.asynccontextmanager
async def overflow_of(chain: Chain, keys: Keys, vendors: VendorFakes) -> AsyncIterator[Overflow]:
    """The real overflow of ``pinecall`` in this loop (its jobs in threads), reaching call-log
    over loopback HTTP as a process would; registered, stopped after."""
    settings = OverflowSettings.from_env(
        {},
        fleet="pinecall",
        fleet_key=keys.production,
        overflow_says=SAYS,
        health_port=0,
        livekit_url=chain.lk.url,
        livekit_api_key=API_KEY,
        livekit_api_secret=API_SECRET,
        call_log_url=chain.urls["call-log"],
        cartesia_url=vendors.cartesia_url,
        cartesia_api_key="lab",
        lab_rooms=True,
        drain_timeout_s=30,
        log_format="text",
    )
    overflow = Overflow(settings, num_idle_processes=2)
    running = asyncio.create_task(overflow.run())
    try:
        async with asyncio.timeout(60):
            await overflow.registered.wait()
        yield overflow
    finally:
        overflow.stop()
        async with asyncio.timeout(60):
            await running


async def offer_of(chain: Chain, room: str, agent_name: str) -> JobOffer:
    """The offer of ``room`` made to ``agent_name`` (bound it with ``asyncio.timeout``)."""
    [made] = await chain.lk.events.wait_for(
        ev.DispatchCreated, lambda e: e.room == room and e.agent_name == agent_name
    )
    return decode(made.metadata, JobOffer)


def heard_from_agents(caller: LabRoom) -> bytes:
    """The audio the caller received from agents, once its room is gone."""
    pcm = b""
    while not caller.audio.empty():
        chunk = caller.audio.get_nowait()
        if chunk.sender.startswith("agent-"):
            pcm += chunk.pcm
    return pcm


async def agent_log(log: Replica, keys: Keys) -> list[tuple[str, dict[str, Any]]]:
    r = await log.get(
        f"/v1/agents/{LAB_AGENT}/log",
        params={"environment": "production"},
        headers=bearer(keys.operator),
    )
    assert r.status_code == 200, r.text
    return [(e["kind"], e["data"]) for e in r.json()["entries"]]


async def test_a_full_fleets_phone_caller_hears_the_overflow_and_is_called_back_when_a_seat_frees(
    chain: Chain,
    call_log: Replica,
    keys: Keys,
    vendor_fakes: VendorFakes,
    call_events: CallEvents,
) -> None:
    trunk = api.SIPOutboundTrunkInfo(
        name="pinecall-outbound", address="sip.example.invalid", numbers=["+15550000000"]
    )
    await chain.livekit.sip.create_outbound_trunk(api.CreateSIPOutboundTrunkRequest(trunk=trunk))
    transport = httpx.ASGITransport(app=call_log.app)  # type: ignore[arg-type]
    async with CallLogClient("http://call-log.lab", keys.operator, transport=transport) as log:
        definition = AgentDefinition(
            name=LAB_AGENT, prompt="You call the lab's callers back.", greeting=GREETING
        )
        await log.put_agent(definition, org=LAB_ORG, environment="production")
    put = await chain.dispatchers[0].put(
        f"/v1/phone-numbers/{NUMBER}",
        json={"agent": LAB_AGENT},
        params={"org": LAB_ORG},
        headers=bearer(keys.app),
    )
    assert put.status_code == 200, put.text
    # the second caller's phone is busy when first called back
    chain.lk.sip.callees[normalize(SECOND)] = Callee(answer=486, ring_s=0.5)
    dialler = chain.service.dialler
    async with contextlib.AsyncExitStack() as stack:
        worker = await start_process(
            chain, stack, host="phones", seats=1, vendors=vendor_fakes, ringing_timeout_s=10
        )
        overflow = await stack.enter_async_context(overflow_of(chain, keys, vendor_fakes))
        async with asyncio.timeout(300):
            # the first caller takes the fleet's one seat
            first = await dial(chain.lk.url, API_KEY, API_SECRET, phone=FIRST, to=NUMBER)
            held = await offer_of(chain, first.room, worker.name)
            await call_events.wait("opened", held.call)
            # the second rings the full fleet: the overflow's sentence, then its call back asked
            second = await dial(chain.lk.url, API_KEY, API_SECRET, phone=SECOND, to=NUMBER)
            overflowed = await offer_of(chain, second.room, overflow.name)
            await second.closed.wait()  # the overflow hung up: its room deleted
            assert (await call_events.wait("sealed", overflowed.call)).outcome == "overflow"
            # a round of the dialler while the seat is held: the follow-up waits for a seat
            await dialler.tick()
            assert chain.lk.events.of(ev.SipCallStarted, lambda e: e.direction == "outbound") == []
            # the first caller hangs up: its seat frees, and the follow-up dials the second back
            await first.leave()
            assert (await call_events.wait("ended", held.call)).outcome == "caller_hangup"
            [busy] = await chain.lk.events.wait_for(
                ev.SipCallStarted, lambda e: e.direction == "outbound"
            )
            await dialler.changes.wait_for(lambda: bool(dialler.applied), timeout=300)
            # the try was not reached; the phone answers the next (and hangs up 6 s after)
            chain.lk.sip.callees[normalize(SECOND)] = Callee(ring_s=0.5, hangup_after_s=6.0)
            [_, started] = await chain.lk.events.wait_for(
                ev.SipCallStarted, lambda e: e.direction == "outbound", count=2
            )
            await dialler.changes.wait_for(lambda: len(dialler.applied) == 2, timeout=300)
            for call in (held.call, *(c for c, _ in dialler.applied if c)):
                await call_events.wait("sealed", call)  # each log sealed before the worker stops
            for room in (first.room, second.room, busy.room, started.room):
                await chain.handled(room, "room_finished")  # no room left for the close to end
    assert second.removed_reason == "ROOM_DELETED"
    assert heard_from_agents(second).strip(b"\x00"), "the caller heard the overflow's voice"
    assert SAYS in [t.strip() for t in vendor_fakes.cartesia.transcripts]
    # the call back: two tries, each dialled once, to the second caller, through the worker
    for sip_call in (busy, started):
        assert (sip_call.to_number, sip_call.from_number) == (SECOND, "+15550000000")
    outbound = chain.lk.events.of(ev.SipCallStarted, lambda e: e.direction == "outbound")
    assert outbound == [busy, started]
    assert busy.room != started.room
    [(not_reached, first_try), (call_back, outcome)] = dialler.applied
    assert (first_try, outcome) == ("not_reached", "answered")
    assert not_reached is not None  # each try's call is known
    assert call_back is not None
    assert chain.lk.sip.legs[busy.call_id].sip_status == 486
    assert chain.lk.sip.legs[busy.call_id].heard == {}  # nobody picked up to hear anything
    for tried, how in ((not_reached, "not_reached"), (call_back, "caller_hangup")):
        ended = await call_events.wait("ended", tried)
        assert (ended.worker, ended.outcome) == (worker.name, how)
    leg = chain.lk.sip.legs[started.call_id]
    assert leg.sip_status == 200
    [(speaker, heard)] = leg.heard.items()  # the callee heard the agent, and only it
    assert speaker.startswith("agent")
    assert heard.first_at >= started.at
    r = await call_log.get(f"/v1/calls/{call_back}/entries", headers=bearer(keys.operator))
    entries = [(e["kind"], e["data"]) for e in r.json()["entries"]]
    kinds = [k for k, _ in entries]
    assert kinds.index("call.dialled") < kinds.index("turn.agent")
    assert next(d["text"] for k, d in entries if k == "turn.agent") == GREETING
    # on the agent's log: the call back asked by the overflow, dialled once, answered
    followed = [(k, d) for k, d in await agent_log(call_log, keys) if k.startswith("callback.")]
    assert [k for k, _ in followed] == [
        "callback.requested",
        "callback.dialled",
        "callback.not_reached",
        "callback.dialled",
        "callback.answered",
    ]
    requested, dialled, busy_said, redialled, answered = (d for _, d in followed)
    assert (requested["number"], requested["call"]) == (SECOND, overflowed.call)
    assert (dialled["number"], dialled["call"], dialled["try"]) == (SECOND, not_reached, 1)
    # LiveKit SIP's status, as the try's call's log says it (its call.dialled and its end)
    r = await call_log.get(f"/v1/calls/{not_reached}/entries", headers=bearer(keys.operator))
    [said] = [e["data"] for e in r.json()["entries"] if e["kind"] == "call.dialled"]
    assert (said["answered"], said["sip_status_code"]) == (False, 486)
    assert busy_said == {
        "callback": dialled["callback"],
        "try": 1,
        "call": not_reached,
        "status": f"SIP 486 {said['sip_status']}",
        "sip_status_code": 486,
        "sip_status": said["sip_status"],
    }
    assert (redialled["call"], redialled["try"]) == (call_back, 2)
    assert (answered["call"], answered["callback"]) == (call_back, dialled["callback"])
    async with chain.service.store.engine.connect() as conn:
        [row] = (await conn.execute(sa.select(FOLLOWUPS))).all()
        tries = (await conn.execute(sa.select(FOLLOWUP_TRIES))).all()
    assert (row.state, row.tries, row.burnt, row.number) == ("answered", 2, 1, SECOND)
    assert sorted((t.attempt, t.call, t.outcome) for t in tries) == [
        (1, not_reached, "not_reached"),
        (2, call_back, "answered"),
    ]
