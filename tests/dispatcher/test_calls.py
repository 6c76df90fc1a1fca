"""What call-log and the agents say ends a room's offers and frees its seat: ``call.opened``,
``call.ended``, an agent that leaves (and the seam of one lost, issue 8's)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from livekit import api
from livekit.protocol import models

from pinecall_contracts.base import decode
from pinecall_contracts.dispatch import JobOffer
from pinecall_loadlab.livekit import StandIn
from pinecall_loadlab.livekit import events as ev
from pinecall_loadlab.livekit.callers import sip_call
from pinecall_loadlab.livekit.testing import API_KEY, API_SECRET
from pinecall_loadlab.scenarios.chain import Chain, ChainConfig, runtime_chain
from pinecall_loadlab.scenarios.runtime_choosing import place_calls
from pinecall_servicekit.testing.apps import Replica
from pinecall_testkit.call_log import Keys, bearer


@pytest.fixture
async def chain(
    standin: StandIn, chain_config: ChainConfig, call_log: Replica
) -> AsyncIterator[Chain]:
    """The chain with call-log: the death handler reads, ends and calls back through it."""
    async with runtime_chain(standin, chain_config, call_log=call_log) as c:
        yield c


async def test_call_opened_ends_the_offers_and_call_ended_frees_the_seat(
    chain: Chain, call_log: Replica, keys: Keys
) -> None:
    """A worker opens its call on call-log before its agent is seen (the real entrypoint does):
    the room is not offered again; the call's end frees the seat."""
    slow = await chain.worker("slow", seats=2)
    chain.lk.freeze(slow.worker_id)  # its agent never joins: only call-log says it opened
    async with asyncio.timeout(60):
        await sip_call(
            chain.livekit, chain.lk.url, API_KEY, API_SECRET, room="opened-1", fleet="pinecall"
        )
        [created] = await chain.lk.events.wait_for(
            ev.DispatchCreated, lambda e: e.room == "opened-1"
        )
        offer = decode(created.metadata, JobOffer)
        r = await call_log.post(
            "/v1/calls",
            json={
                "call": offer.call,
                "agent": offer.agent,
                "org": offer.org,
                "environment": offer.environment,
                "room": offer.room,
                "worker": slow.name,
            },
            headers=bearer(keys.production),
        )
        assert r.status_code == 200, r.text
        placing = chain.service.placing
        await placing.changes.wait_for(
            lambda: any(e.call == offer.call for e in placing.handled_calls), timeout=30
        )
        row = await chain.service.store.rooms.get(offer.call)
        assert row is not None
        assert (row.state, row.worker) == ("opened", slow.name)
        # timed from its offer to its opening
        count = chain.service.metrics.registry.get_sample_value(
            "pinecall_offer_to_open_seconds_count", {"fleet": "pinecall"}
        )
        assert count == 1.0
        r = await call_log.post(
            f"/v1/calls/{offer.call}/end",
            json={"outcome": "completed"},
            headers=bearer(keys.production),
        )
        assert r.status_code == 200, r.text
        await placing.changes.wait_for(
            lambda: sum(e.call == offer.call for e in placing.handled_calls) == 2, timeout=30
        )
    row = await chain.service.store.rooms.get(offer.call)
    assert row is not None
    assert (row.state, row.outcome) == ("ended", "completed")
    # offered once: the open ended its offers before any re-offer
    assert len(chain.lk.events.of(ev.DispatchCreated, lambda e: e.room == "opened-1")) == 1


async def test_an_agent_lost_frees_its_seat_for_the_next_call(chain: Chain) -> None:
    one = await chain.worker("one-seat", seats=1)
    await chain.overflow()
    async with asyncio.timeout(60):
        [first], _ = await place_calls(chain, prefix="lost", calls=1, settle_each=True)
        assert first.by == one.name
        people = await chain.livekit.room.list_participants(
            api.ListParticipantsRequest(room=first.room)
        )
        [agent] = [p for p in people.participants if p.kind == models.ParticipantInfo.Kind.AGENT]
        chain.lk.cut(first.room, agent.identity)  # its connection lost, no goodbye
        await chain.handled(first.room, "participant_left", "AGENT")
        # the worker's job ends (LiveKit terminated it) and its next heartbeat says so
        before = {id(e) for e in chain.lk.events.events}
        await chain.lk.events.wait_for(
            ev.WorkerStatusReported,
            lambda e: id(e) not in before and e.worker_id == one.worker_id and e.job_count == 0,
        )
        await one.worker.heartbeat.beat()
        await chain.service.roster.refresh()
        [second], _ = await place_calls(chain, prefix="next", calls=1, settle_each=True)
    assert second.by == one.name  # not the overflow: the lost agent's seat was freed
    [row] = await chain.service.store.rooms.of_room("production", first.room)
    assert (row.state, row.outcome) == ("ended", "agent_left")
