"""Acceptance 3: every webhook verifies with livekit-api's WebhookReceiver, on the raw bytes."""

from __future__ import annotations

import asyncio
import json

import pytest
from livekit import api

from pinecall_loadlab.livekit import StandIn
from pinecall_loadlab.livekit import events as ev
from pinecall_loadlab.livekit.testing import API_KEY, API_SECRET, Received, WebhookSink

receiver = api.WebhookReceiver(api.TokenVerifier(API_KEY, API_SECRET))


def verify(r: Received) -> api.WebhookEvent:
    """What a correct receiver does: hash the body exactly as it arrived."""
    assert r.headers["Content-Type"] == "application/webhook+json"
    assert r.headers["User-Agent"] == "LiveKit"
    assert not r.headers["Authorization"].startswith("Bearer")
    return receiver.receive(r.body.decode(), r.headers["Authorization"])


async def room_life(livekit_api: api.LiveKitAPI, name: str = "call-1") -> None:
    await livekit_api.room.create_room(api.CreateRoomRequest(name=name))
    await livekit_api.room.delete_room(api.DeleteRoomRequest(room=name))


async def test_every_webhook_verifies_on_its_raw_bytes(
    standin: StandIn, livekit_api: api.LiveKitAPI, webhook_sink: WebhookSink
) -> None:
    await room_life(livekit_api)
    async with asyncio.timeout(30):
        got = await webhook_sink.wait_for(2)
    events = [verify(r) for r in got]
    assert [e.event for e in events] == ["room_started", "room_finished"]  # one room, in order
    assert all(e.id.startswith("EV_") and e.created_at > 0 for e in events)
    assert events[0].room.name == "call-1"
    body = json.loads(got[0].body)
    assert isinstance(body["createdAt"], str)  # protojson: int64 as a string, camelCase names


async def test_a_receiver_that_reserializes_the_json_fails(
    standin: StandIn, livekit_api: api.LiveKitAPI, webhook_sink: WebhookSink
) -> None:
    """The JWT carries the sha256 of the exact bytes sent. Parsing and dumping the JSON again
    (here with Python's default separators, as a framework's `request.json()` round trip would)
    yields the same event but different bytes, so the hash no longer matches."""
    await room_life(livekit_api)
    async with asyncio.timeout(30):
        [r] = await webhook_sink.wait_for(1)
    reserialized = json.dumps(json.loads(r.body))
    assert json.loads(reserialized) == json.loads(r.body)
    assert verify(r).event == "room_started"
    with pytest.raises(Exception, match="hash mismatch"):
        receiver.receive(reserialized, r.headers["Authorization"])


async def test_5xx_is_retried_with_the_same_event(
    standin: StandIn, livekit_api: api.LiveKitAPI, webhook_sink: WebhookSink
) -> None:
    webhook_sink.fail_next = 2
    await livekit_api.room.create_room(api.CreateRoomRequest(name="call-1"))
    async with asyncio.timeout(30):
        got = await webhook_sink.wait_for(3)
        await standin.events.wait_for(ev.WebhookDelivered)
    assert len({verify(r).id for r in got}) == 1


async def test_faults_drop_duplicate_and_reorder(
    standin: StandIn, livekit_api: api.LiveKitAPI, webhook_sink: WebhookSink
) -> None:
    faults = standin.webhooks.faults
    faults.drop_next = 1
    await room_life(livekit_api, "dropped")  # room_started dropped, room_finished sent
    faults.duplicate_next = 1
    await room_life(livekit_api, "doubled")  # room_started twice
    faults.reorder_next = 1
    await room_life(livekit_api, "swapped")  # room_finished before room_started
    async with asyncio.timeout(30):
        got = await webhook_sink.wait_for(6)
    seen = [(e.room.name, e.event) for e in map(verify, got)]
    assert [s for s in seen if s[0] == "dropped"] == [("dropped", "room_finished")]
    assert [s for s in seen if s[0] == "doubled"] == [
        ("doubled", "room_started"),
        ("doubled", "room_started"),
        ("doubled", "room_finished"),
    ]
    assert [s for s in seen if s[0] == "swapped"] == [
        ("swapped", "room_finished"),
        ("swapped", "room_started"),
    ]


async def test_an_event_queued_too_long_is_dropped(
    standin: StandIn, livekit_api: api.LiveKitAPI, webhook_sink: WebhookSink
) -> None:
    standin.config.webhook_max_age_s = 0.05
    standin.webhooks.faults.delay_s = 0.1  # each event waits longer than it may
    await livekit_api.room.create_room(api.CreateRoomRequest(name="call-1"))
    async with asyncio.timeout(30):
        [dropped] = await standin.events.wait_for(ev.WebhookDropped)
    assert (dropped.event, dropped.why) == ("room_started", "too old")
    assert webhook_sink.received == []
