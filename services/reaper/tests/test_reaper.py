"""The reaper's reap against the stand-in and a call-log replica (issue 8, "The reaper";
acceptance 5): webhooks lost for some rooms, and still every call nobody runs ends, every room
left over goes; two replicas reaping at once do not fight; MAX_CALL_SECONDS. The reap is driven
directly with an explicit ``now`` (minutes later), not by waiting."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt

from livekit import api

from pinecall_clients.livekit import LiveKitAccess
from pinecall_labroom import LabRoom
from pinecall_loadlab.livekit import StandIn
from pinecall_loadlab.livekit import events as ev
from pinecall_loadlab.livekit.callers import agent_token, sip_call
from pinecall_loadlab.livekit.testing import API_KEY, API_SECRET
from pinecall_reaper.domain import Rules, Verdict
from pinecall_reaper.reaper import Reaper
from pinecall_testkit.call_log import Keys, Replica, bearer, entry, opening

from .conftest import log_client, on

LOST = {"participant_left", "room_finished"}


async def open_call(call_log: Replica, keys: Keys, call: str, room: str) -> None:
    """A call a worker opened and wrote two entries on, just now."""
    auth = bearer(keys.production)
    r = await call_log.post("/v1/calls", json=opening(call, room=room), headers=auth)
    assert r.is_success
    ts = dt.datetime.now(dt.UTC).isoformat()
    body = {"after": 0, "entries": [entry(n, ts=ts) for n in range(2)]}
    r = await call_log.post(f"/v1/calls/{call}/entries", json=body, headers=auth)
    assert r.is_success


async def agent_in(standin: StandIn, room: str) -> LabRoom:
    token = agent_token(API_KEY, API_SECRET, room=room, identity=f"agent-{room}")
    return await LabRoom.connect(standin.url, token)


async def state(call_log: Replica, keys: Keys, call: str) -> tuple[str, str | None, list[str]]:
    auth = bearer(keys.operator)
    record = (await call_log.get(f"/v1/calls/{call}", headers=auth)).json()
    kinds = [
        e["kind"]
        for e in (await call_log.get(f"/v1/calls/{call}/entries", headers=auth)).json()["entries"]
    ]
    return record["state"], record["outcome"], kinds


async def cause_of(call_log: Replica, keys: Keys, call: str) -> str | None:
    record = (await call_log.get(f"/v1/calls/{call}", headers=bearer(keys.operator))).json()
    return record["cause"]  # type: ignore[no-any-return]


async def test_lost_webhooks_leave_nothing_open_and_two_replicas_do_not_fight(
    reaper: Reaper, standin: StandIn, livekit_api: api.LiveKitAPI, call_log: Replica, keys: Keys
) -> None:
    standin.config.connection_timeout_s = 0.2  # LiveKit's is 5 s; only the order matters here
    standin.webhooks.faults.lose = {"room-a": set(LOST), "room-b": set(LOST)}
    callers: dict[str, LabRoom] = {}
    async with asyncio.timeout(60):
        for call, room in (
            ("call_a", "room-a"),
            ("call_b", "room-b"),
            ("call_c", "room-c"),
            ("call_d", "room-d"),
        ):
            await open_call(call_log, keys, call, room)
            callers[room] = await sip_call(
                livekit_api, standin.url, API_KEY, API_SECRET, room=room, fleet="pinecall"
            )
        agents = {room: await agent_in(standin, room) for room in ("room-a", "room-b", "room-c")}
        # room-a: its worker dies (the connection lost, no goodbye); participant_left is lost
        await agents["room-a"].abort()
        await standin.events.wait_for(ev.ParticipantLeft, lambda e: e.identity == "agent-room-a")
        # room-b: the room ends with everyone in it; room_finished and participant_left are lost
        await livekit_api.room.delete_room(api.DeleteRoomRequest(room="room-b"))
        await standin.events.wait_for(ev.RoomFinished, lambda e: e.room == "room-b")
        # room-d: the death handler ended the call drained, and no sentence job came
        r = await call_log.post(
            "/v1/calls/call_d/end",
            json={"outcome": "drained", "cause": "lost_agent"},
            headers=bearer(keys.production),
        )
        assert r.is_success
        # room-s: a room nobody ever joined; room-w: a caller no call was opened for
        await livekit_api.room.create_room(api.CreateRoomRequest(name="room-s"))
        callers["room-w"] = await sip_call(
            livekit_api, standin.url, API_KEY, API_SECRET, room="room-w", fleet="pinecall"
        )
    lost = {e.event for e in standin.events.of(ev.WebhookDropped) if e.why == "fault: lost"}
    assert lost == LOST

    # now: nothing is quiet yet and every room is young
    now = await reaper.reap()
    assert (now.reaped, now.rooms, now.failed) == ([], [], [])

    # six minutes on, two replicas reap at once
    later = dt.datetime.now(dt.UTC) + dt.timedelta(minutes=6)
    async with log_client(call_log, keys.service) as log:
        livekit = LiveKitAccess(url=standin.url, api_key=API_KEY, api_secret=API_SECRET)
        other = Reaper(log, on({"production": livekit}), Rules())
        async with asyncio.timeout(60):
            reaps = await asyncio.gather(reaper.reap(later), other.reap(later))
        await other.aclose()
    assert [s.failed for s in reaps] == [[], []]
    verdicts: dict[str, set[Verdict]] = {}
    for r in (r for s in reaps for r in s.reaped):
        verdicts.setdefault(r.call, set()).add(r)
    expected = {
        "call_a": Verdict(
            call="call_a",
            room="room-a",
            why="no_agent",
            outcome="drained",
            take_room=True,
            cause="stale",
        ),
        "call_b": Verdict(
            call="call_b",
            room="room-b",
            why="room_gone",
            outcome="drained",
            take_room=False,
            cause="stale",
        ),
        "call_d": Verdict(
            call="call_d", room="room-d", why="no_agent", outcome=None, take_room=True
        ),
    }
    assert verdicts.keys() == expected.keys()
    for call, verdict in expected.items():
        # both replicas may judge a call; the one that looked after the other took the room
        # down finds it gone, and that changes nothing the first did: it ends the call as the
        # first did, or, if it read the call after the first ended it, finds it ended (None)
        after = dataclasses.replace(verdict, why="room_gone", take_room=False)
        ended = dataclasses.replace(after, outcome=None, cause=None)
        assert verdict in verdicts[call], call
        assert verdicts[call] <= {verdict, after, ended}, call
    assert sorted(r for s in reaps for r in s.rooms) == ["room-s", "room-w"]
    for call in ("call_a", "call_b", "call_d"):
        sealed, outcome, kinds = await state(call_log, keys, call)
        assert (sealed, outcome) == ("sealed", "drained")
        assert (kinds.count("call.ended"), kinds.count("call.sealed")) == (1, 1), call
        assert kinds[-1] == "call.sealed"
    # the reaper's own ends say stale; the one the death handler ended keeps its cause
    assert [await cause_of(call_log, keys, c) for c in ("call_a", "call_b", "call_d")] == [
        "stale",
        "stale",
        "lost_agent",
    ]
    assert (await state(call_log, keys, "call_c"))[:2] == ("open", None)
    listed = {r.name for r in (await livekit_api.room.list_rooms(api.ListRoomsRequest())).rooms}
    assert listed == {"room-c"}
    for room in ("room-a", "room-d", "room-w"):
        await asyncio.wait_for(callers[room].closed.wait(), 10)
        assert callers[room].removed_reason == "ROOM_DELETED"

    # thirty-one minutes on: the call still running hits MAX_CALL_SECONDS
    ceiling = await reaper.reap(dt.datetime.now(dt.UTC) + dt.timedelta(minutes=31))
    assert ceiling.reaped == [
        Verdict(call="call_c", room="room-c", why="ceiling", outcome="timeout", take_room=True)
    ]
    assert (await state(call_log, keys, "call_c"))[:2] == ("sealed", "timeout")
    assert await cause_of(call_log, keys, "call_c") is None  # a timeout is not drained
    await asyncio.wait_for(agents["room-c"].closed.wait(), 10)
    assert agents["room-c"].removed_reason == "ROOM_DELETED"
    assert (await livekit_api.room.list_rooms(api.ListRoomsRequest())).rooms == []


async def test_a_livekit_that_does_not_answer_is_no_evidence_a_room_is_gone(
    call_log: Replica, keys: Keys
) -> None:
    await open_call(call_log, keys, "call_x", "room-x")
    async with log_client(call_log, keys.service) as log:
        nobody = LiveKitAccess(url="http://127.0.0.1:9", api_key=API_KEY, api_secret=API_SECRET)
        blind = Reaper(log, on({"production": nobody}), Rules())
        async with asyncio.timeout(30):
            done = await blind.reap(dt.datetime.now(dt.UTC) + dt.timedelta(hours=1))
        await blind.aclose()
    assert (done.reaped, done.rooms, len(done.failed)) == ([], [], 1)
    assert "ListRooms" in done.failed[0]
    assert (await state(call_log, keys, "call_x"))[:2] == ("open", None)
