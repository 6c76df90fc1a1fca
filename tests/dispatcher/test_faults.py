"""Duplicate, delayed and reordered webhooks, and two replicas sweeping together, never make two
offers of one room (issue 7, acceptance 4): the room's row decides."""

from __future__ import annotations

import asyncio
import secrets

import msgspec

from pinecall_contracts.base import decode
from pinecall_contracts.dispatch import JobOffer
from pinecall_contracts.livekit import LiveKitEvent
from pinecall_loadlab.livekit import events as ev
from pinecall_loadlab.livekit.callers import sip_call
from pinecall_loadlab.livekit.testing import API_KEY, API_SECRET
from pinecall_loadlab.scenarios.chain import Chain, runtime_chain
from pinecall_loadlab.scenarios.runtime_choosing import place_calls


def dispatches(chain: Chain, room: str) -> list[JobOffer]:
    return [
        decode(d.metadata, JobOffer)
        for d in chain.lk.events.of(ev.DispatchCreated, lambda e: e.room == room)
    ]


async def stream(chain: Chain) -> list[LiveKitEvent]:
    """Every event on the chain's LiveKit stream, in order."""
    bus = chain.service.bus
    info = await bus.js.stream_info(bus.subjects.livekit_stream)
    out = []
    for seq in range(info.state.first_seq, info.state.last_seq + 1):
        msg = await bus.js.get_msg(bus.subjects.livekit_stream, seq)
        assert msg.data is not None
        out.append(msgspec.json.decode(msg.data, type=LiveKitEvent))
    return out


async def test_duplicated_delayed_and_reordered_webhooks_make_one_offer_per_room(
    chain: Chain,
) -> None:
    a = await chain.worker("worker-a", seats=8)
    faults = chain.lk.webhooks.faults
    faults.duplicate_next, faults.delay_s, faults.reorder_next = 100, 0.2, 3
    async with asyncio.timeout(90):
        calls, _ = await place_calls(chain, prefix="faulty", calls=4, settle_each=True)
    assert [c.by for c in calls] == [a.name] * 4
    for call in calls:
        assert [o.attempt for o in dispatches(chain, call.room)] == [1]
    # the stream dropped the duplicates; deliver every event again past its window, as a
    # replay would: the rows decide, and nothing is offered again
    faults.duplicate_next, faults.delay_s, faults.reorder_next = 0, 0.0, 0
    events = await stream(chain)
    bus = chain.service.bus
    for e in events:
        fresh = msgspec.structs.replace(e, id=f"EV_again_{secrets.token_hex(6)}")
        subject = bus.subjects.livekit_event(e.environment, e.event, e.room)
        assert await bus.publish_once(subject, fresh, msg_id=fresh.id)
    async with asyncio.timeout(30):
        for e in events:
            if e.room is not None:
                await chain.handled(e.room, e.event, e.participant_kind)
        placing = chain.service.placing
        await placing.changes.wait_for(
            lambda: sum(x.id.startswith("EV_again_") for x in placing.handled) == len(events),
            timeout=30,
        )
    for call in calls:
        assert [o.attempt for o in dispatches(chain, call.room)] == [1]
        assert await chain.answered_by(call.room) == a.name


async def test_two_replicas_sweeping_together_never_offer_one_room_twice(chain: Chain) -> None:
    """A worker that never answers takes the first offers; both replicas sweep every 0.5 s and
    race for each re-offer: each room gets exactly one dispatch per offer, to the other worker."""
    async with chain.replica() as second:
        chain.dispatchers.append(second)
        mute = await chain.worker("mute", seats=8)
        mute.mute()
        live = await chain.worker("worker-b", seats=8)
        async with asyncio.timeout(120):
            calls, _ = await place_calls(chain, prefix="race", calls=6, interval_s=0.2)
        assert [c.by for c in calls] == [live.name] * 6
        reoffered = 0
        for call in calls:
            offers = dispatches(chain, call.room)
            assert [o.attempt for o in offers] == list(range(1, len(offers) + 1))
            reoffered += len(offers) > 1
        assert reoffered > 0  # the mute worker was offered rooms, and each went on once
        chain.dispatchers.remove(second)


async def test_a_replica_that_starts_late_misses_nothing(standin, chain_config) -> None:  # type: ignore[no-untyped-def]
    """The durable consumer: a ring stored while no dispatcher runs is offered by the replica
    that starts after."""
    async with runtime_chain(standin, chain_config, dispatchers=0) as chain:
        async with chain.replica() as first:
            chain.dispatchers.append(first)
            a = await chain.worker("worker-a", seats=2)
            chain.dispatchers.remove(first)
        async with asyncio.timeout(30):
            caller = await sip_call(
                chain.livekit, standin.url, API_KEY, API_SECRET, room="late-1", fleet="pinecall"
            )
            await standin.webhooks.drain()
        assert dispatches(chain, "late-1") == []
        async with chain.replica() as later:
            chain.dispatchers.append(later)
            async with asyncio.timeout(30):
                await chain.handled("late-1", "participant_joined", "AGENT")
            assert await chain.answered_by("late-1") == a.name
            chain.dispatchers.remove(later)
        await caller.leave()
