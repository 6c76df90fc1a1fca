"""Who takes a call (issue 7, acceptance 3): the offer by name, the re-offer, the overflow.

The dispatcher's numbers are shortened (conftest ``SHORT``: re-offer and fleet wait 4 s, sweep
0.5 s); the rules are the seed's. Every wait awaits an event of the stand-in or the dispatcher.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools

from livekit import api

from pinecall_contracts.base import decode
from pinecall_contracts.dispatch import JobOffer, Journal
from pinecall_loadlab.livekit import events as ev
from pinecall_loadlab.scenarios.chain import Chain, heard_any
from pinecall_loadlab.scenarios.runtime_choosing import place_calls

from .conftest import SHORT


async def journal_of(chain: Chain, room: str) -> Journal:
    """The journal of the call in ``room``, once the dispatcher applied its agent's arrival."""
    async with asyncio.timeout(30):
        await chain.handled(room, "participant_joined", "AGENT")
    [row] = await chain.service.store.rooms.of_room("production", room)
    return await chain.service.store.views.journal(row.call)


def offers_to(chain: Chain, room: str) -> list[JobOffer]:
    """Every dispatch the dispatcher made for ``room``, in order, as the stand-in received it."""
    return [
        decode(d.metadata, JobOffer)
        for d in chain.lk.events.of(ev.DispatchCreated, lambda e: e.room == room)
    ]


async def test_a_sip_call_is_offered_at_once_by_name_with_its_job(chain: Chain) -> None:
    a = await chain.worker("worker-a", seats=4)
    async with asyncio.timeout(60):
        [call], callers = await place_calls(chain, prefix="one", calls=1, settle_each=True)
    assert call.by == a.name
    [offer] = offers_to(chain, call.room)
    assert (offer.fleet, offer.environment, offer.room, offer.attempt, offer.job) == (
        "pinecall",
        "production",
        call.room,
        1,
        "answer",
    )
    assert (offer.caller, offer.number, offer.agent, offer.org) == (
        "sip",
        "+1555000000",
        "lab-agent",
        "lab",
    )
    [line, opened] = (await journal_of(chain, call.room)).lines
    assert heard_any(line.line) == (
        f"room {offer.call}: offered to {a.name}: 4 seats free, heard N s ago (offer 1)"
    )
    assert opened.line == f"room {offer.call}: opened by {a.name}"
    for c in callers:
        await c.leave()


async def test_the_worker_with_the_most_seats_free_counting_offers_not_opened(
    chain: Chain,
) -> None:
    small = await chain.worker("worker-small", seats=2)
    big = await chain.worker("worker-big", seats=3)
    async with asyncio.timeout(90):
        calls, _ = await place_calls(chain, prefix="most", calls=5, settle_each=True)
    # 3 free beats 2, then 2 and 2 (by name: big), then 1 beats ... every seat is used
    assert [c.by for c in calls] == [big.name, big.name, small.name, big.name, small.name]


async def test_declined_and_unanswered_offers_go_to_another_then_to_the_overflow(
    chain: Chain,
) -> None:
    """Three workers that never open a call: one declines every offer (LiveKit's 0.7 load
    threshold says it is full), one never answers (frozen at LiveKit, still heartbeating: an unmodified
    AgentServer, which does not notice a hung LiveKit within the test, where our worker would
    reconnect in 3 s), one declines. Each is offered the room once, 4 s apart (the re-offer
    time), its dispatch deleted before the next; after the third the room goes to the overflow,
    which answers it."""
    await chain.pretend("decliner-a", seats=8, load=lambda _s: 1.0)
    mute = await chain.pretend("mute", seats=8, load=lambda _s: 0.0)
    [registered] = chain.lk.events.of(ev.WorkerRegistered, lambda e: e.agent_name == mute)
    chain.lk.freeze(registered.worker_id)
    await chain.pretend("decliner-b", seats=8, load=lambda _s: 1.0)
    overflow = await chain.overflow()
    async with asyncio.timeout(90):
        [call], _ = await place_calls(chain, prefix="never", calls=1, settle_each=True)
    assert call.by == "pinecall/overflow"
    offers = offers_to(chain, call.room)
    assert [o.attempt for o in offers] == [1, 2, 3, 4]
    created = chain.lk.events.of(ev.DispatchCreated, lambda e: e.room == call.room)
    assert len({d.agent_name for d in created[:3]}) == 3  # three workers, one offer each
    assert created[3].agent_name == "pinecall/overflow"
    journal = await journal_of(chain, call.room)
    assert journal.lines[3].line.endswith("offered 3 times and never opened")
    firsts = journal.lines[:4]
    gaps = [(b.at - a.at).total_seconds() for a, b in itertools.pairwise(firsts)]
    assert all(gap >= 4.0 for gap in gaps)
    # a late accept never puts two agents in the room: only the overflow's dispatch is left
    left = await chain.livekit.agent_dispatch.list_dispatch(call.room)
    assert [d.agent_name for d in left if d.agent_name != "pinecall"] == ["pinecall/overflow"]
    assert overflow


async def test_a_fleet_nobody_heard_waits_then_overflows(chain: Chain) -> None:
    await chain.overflow()
    async with asyncio.timeout(60):
        [call], _ = await place_calls(chain, prefix="unheard", calls=1, settle_each=True)
    assert call.by == "pinecall/overflow"
    [line, _opened] = (await journal_of(chain, call.room)).lines
    assert line.line.endswith("no worker of the fleet heard lately")
    [row] = await chain.service.store.rooms.of_room("production", call.room)
    assert row.arrived_at is not None
    assert row.offered_at is not None
    assert (row.offered_at - row.arrived_at).total_seconds() >= 4.0  # the fleet's wait


async def test_a_fleet_with_no_seat_overflows_at_once(chain: Chain) -> None:
    one = await chain.worker("one-seat", seats=1)
    await chain.overflow()
    async with asyncio.timeout(60):
        calls, _ = await place_calls(chain, prefix="seat", calls=2, settle_each=True)
    assert [c.by for c in calls] == [one.name, "pinecall/overflow"]
    [line, _opened] = (await journal_of(chain, calls[1].room)).lines
    assert line.line.endswith("no worker heard lately has a seat")
    assert [o.attempt for o in offers_to(chain, calls[1].room)] == [1]  # straight to it


async def test_the_dispatch_metadata_is_what_the_worker_reads(
    chain: Chain,
) -> None:
    """The job a worker finds in ``ctx.job.metadata`` is the JobOffer the dispatcher made."""
    a = await chain.worker("worker-m", seats=2)
    async with asyncio.timeout(60):
        [call], _ = await place_calls(chain, prefix="meta", calls=1, settle_each=True)
    dispatches = await chain.livekit.agent_dispatch.list_dispatch(call.room)
    [ours] = [d for d in dispatches if d.agent_name == a.name]
    [job] = ours.state.jobs
    offer = decode(job.metadata, JobOffer)
    assert offer.call == offers_to(chain, call.room)[0].call
    # it says when the room is offered again unless opened: the re-offer time after this offer,
    # which was taken after the caller arrived and before the stand-in received its dispatch
    [made] = chain.lk.events.of(ev.DispatchCreated, lambda e: e.room == call.room)
    assert offer.reoffer_at is not None
    offered_at = offer.reoffer_at - dt.timedelta(seconds=SHORT["reoffer_s"])
    assert offer.arrived_at <= offered_at <= dt.datetime.fromtimestamp(made.at, dt.UTC)
    assert isinstance(ours, api.AgentDispatch)
