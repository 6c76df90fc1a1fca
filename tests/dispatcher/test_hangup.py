"""A caller who hangs up before any worker opened the call (issue 7, acceptance 6): no further
offer, and no dispatch on a room that is gone (CreateDispatch would make it again)."""

from __future__ import annotations

import asyncio

from livekit import api

from pinecall_loadlab.livekit import events as ev
from pinecall_loadlab.livekit.callers import LAB_AGENT, LAB_ORG, sip_call
from pinecall_loadlab.livekit.testing import API_KEY, API_SECRET
from pinecall_loadlab.scenarios.chain import Chain


async def call_of(chain: Chain, room: str) -> str:
    [row] = await chain.service.store.rooms.of_room("production", room)
    return row.call


async def ring(chain: Chain, room: str, phone: str) -> object:
    caller = await sip_call(
        chain.livekit, chain.lk.url, API_KEY, API_SECRET, room=room, fleet="pinecall", phone=phone
    )
    await chain.lk.events.wait_for(ev.DispatchCreated, lambda e: e.room == room)
    return caller


async def test_a_hang_up_before_an_open_ends_the_offers_and_withdraws_the_dispatch(
    chain: Chain,
) -> None:
    mute = await chain.worker("mute", seats=8)
    mute.mute()  # heard by the roster, never answers LiveKit
    await chain.overflow()
    async with asyncio.timeout(60):
        gone = await ring(chain, "hangup-1", "+15550001")
        marker = await ring(chain, "hangup-2", "+15550002")
        await gone.leave()  # type: ignore[attr-defined]
        await chain.handled("hangup-1", "participant_left", "SIP")
        # the marker, offered with it, is offered again once its time comes (to the overflow,
        # the only worker having been tried): by then the first would have been too
        await chain.handled("hangup-2", "participant_joined", "AGENT")
    assert await chain.answered_by("hangup-2") == "pinecall/overflow"
    assert len(chain.lk.events.of(ev.DispatchCreated, lambda e: e.room == "hangup-1")) == 1
    [row] = await chain.service.store.rooms.of_room("production", "hangup-1")
    assert (row.state, row.outcome) == ("ended", "caller_hangup")
    assert (row.agent, row.org) == (LAB_AGENT, LAB_ORG)  # the lab's SIP rule's ring
    left = await chain.livekit.agent_dispatch.list_dispatch("hangup-1")
    assert [d.agent_name for d in left] == ["pinecall"]  # only the ring: ours was deleted
    journal = await chain.service.store.views.journal(row.call)
    assert journal.lines[-1].line.endswith("the caller hung up before a worker opened the call")
    await marker.leave()  # type: ignore[attr-defined]


async def test_no_dispatch_is_made_on_a_room_that_is_gone_even_when_its_webhooks_are_lost(
    chain: Chain,
) -> None:
    """The caller's goodbye and the room's end never reach the dispatcher (dropped webhooks):
    at the re-offer ListDispatch says the room is not active, and the room ends there."""
    mute = await chain.worker("mute", seats=8)
    mute.mute()
    async with asyncio.timeout(60):
        caller = await ring(chain, "lost-1", "+15550003")
        call = await call_of(chain, "lost-1")
        chain.lk.webhooks.faults.drop_next = 1000
        await caller.leave()  # type: ignore[attr-defined]
        await chain.livekit.room.delete_room(api.DeleteRoomRequest(room="lost-1"))
        await chain.outcome(call, "room_gone")
    assert len(chain.lk.events.of(ev.DispatchCreated, lambda e: e.room == "lost-1")) == 1
    assert "lost-1" not in chain.lk.rooms.rooms  # not made again
    row = await chain.service.store.rooms.get(call)
    assert row is not None
    assert (row.state, row.outcome) == ("ended", "room_gone")
