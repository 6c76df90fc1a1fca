"""The dispatcher reads LiveKit's events through their contract alone (issue 15, item 3):
``LiveKitEvent`` carries every fact it places a call by, lifted by webhook-ingest, the one reader
of a webhook's body."""

from __future__ import annotations

import asyncio
import time

from livekit import api

from pinecall_contracts.base import decode
from pinecall_contracts.dispatch import JobOffer
from pinecall_contracts.livekit import LiveKitEvent
from pinecall_loadlab.livekit import events as ev
from pinecall_loadlab.livekit.callers import sip_call
from pinecall_loadlab.livekit.testing import API_KEY, API_SECRET
from pinecall_loadlab.scenarios.chain import Chain
from pinecall_loadlab.scenarios.runtime_choosing import RING


async def test_a_caller_is_placed_from_the_event_s_fields_never_from_its_body(
    chain: Chain,
) -> None:
    """A phone caller's participant_joined whose body is no webhook at all (LiveKit's own is
    lost on the way) is placed as its fields say: the room's sid, the caller's kind, its number."""
    a = await chain.worker("worker-a", seats=2)
    chain.lk.webhooks.faults.lose["own-1"] = {"participant_joined"}
    caller = await sip_call(
        chain.livekit,
        chain.lk.url,
        API_KEY,
        API_SECRET,
        room="own-1",
        fleet="pinecall",
        phone="+15550123",
        metadata=RING,
    )
    [room] = (await chain.livekit.room.list_rooms(api.ListRoomsRequest(names=["own-1"]))).rooms
    joined = LiveKitEvent(
        id="EV_own_joined",
        environment="production",
        event="participant_joined",
        created_at=int(time.time()),
        room="own-1",
        participant="sip_+15550123",
        participant_kind="SIP",
        body="",
        room_sid=room.sid,
        participant_attributes={"sip.phoneNumber": "+15550123"},
    )
    bus = chain.service.bus
    subject = bus.subjects.livekit_event(joined.environment, joined.event, joined.room)
    assert await bus.publish_once(subject, joined, msg_id=joined.id)
    async with asyncio.timeout(60):
        [created] = await chain.lk.events.wait_for(ev.DispatchCreated, lambda e: e.room == "own-1")
    offer = decode(created.metadata, JobOffer)
    assert (created.agent_name, offer.caller, offer.number) == (a.name, "sip", "+15550123")
    [row] = await chain.service.store.rooms.of_room("production", "own-1")
    assert row.room_sid == room.sid
    await caller.leave()
