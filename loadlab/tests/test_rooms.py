"""Rooms close as LiveKit closes them: empty timeout, departure timeout."""

from __future__ import annotations

import asyncio

from livekit import api

from pinecall_labroom import LabRoom
from pinecall_loadlab.livekit import StandIn
from pinecall_loadlab.livekit import events as ev
from pinecall_loadlab.livekit.callers import caller_token
from pinecall_loadlab.livekit.testing import API_KEY, API_SECRET


async def test_a_room_nobody_joins_closes_after_its_empty_timeout(
    standin: StandIn, livekit_api: api.LiveKitAPI
) -> None:
    await livekit_api.room.create_room(api.CreateRoomRequest(name="idle", empty_timeout=1))
    async with asyncio.timeout(30):
        await standin.events.wait_for(ev.RoomFinished, lambda e: e.room == "idle")
    assert list((await livekit_api.room.list_rooms(api.ListRoomsRequest())).rooms) == []


async def test_a_room_closes_after_its_departure_timeout(
    standin: StandIn, livekit_api: api.LiveKitAPI
) -> None:
    await livekit_api.room.create_room(
        api.CreateRoomRequest(name="r", empty_timeout=300, departure_timeout=1)
    )
    visitor = await LabRoom.connect(
        standin.url, caller_token(API_KEY, API_SECRET, room="r", identity="v")
    )
    people = await livekit_api.room.list_participants(api.ListParticipantsRequest(room="r"))
    assert [p.identity for p in people.participants] == ["v"]
    async with asyncio.timeout(30):
        await visitor.leave()
        await standin.events.wait_for(ev.RoomFinished, lambda e: e.room == "r")


async def test_a_join_that_creates_the_room_applies_the_tokens_agents(standin: StandIn) -> None:
    """`roomConfig.agents` applies only when that join creates the room (reference §2.2)."""
    token = (
        api.AccessToken(API_KEY, API_SECRET)
        .with_identity("visitor")
        .with_grants(api.VideoGrants(room_join=True, room="web-1"))
        .with_room_config(
            api.RoomConfiguration(agents=[api.RoomAgentDispatch(agent_name="support")])
        )
        .to_jwt()
    )
    visitor = await LabRoom.connect(standin.url, token)
    async with asyncio.timeout(30):
        [ended] = await standin.events.wait_for(ev.JobRequestEnded, lambda e: e.room == "web-1")
        # no automatic ("") dispatch when the token names agents
        assert [d.agent_name for d in standin.rooms.rooms["web-1"].dispatches.values()] == [
            "support"
        ]
        await visitor.leave()
    assert (ended.agent_name, ended.outcome) == ("support", "no_worker")
