"""Acceptance 2: livekit-api's LiveKitAPI against the stand-in's Twirp services, grants included."""

from __future__ import annotations

import aiohttp
import pytest
from livekit import api
from livekit.api.twirp_client import TwirpClient

from pinecall_loadlab.livekit import StandIn
from pinecall_loadlab.livekit.testing import API_KEY, API_SECRET

WRONG_SECRET = "a-wrong-secret-of-at-least-32-characters"


def token(grants: api.VideoGrants, *, key: str = API_KEY, secret: str = API_SECRET) -> str:
    return api.AccessToken(key, secret).with_grants(grants).to_jwt()


async def test_rooms_participants_and_dispatches_round_trip(
    standin: StandIn, livekit_api: api.LiveKitAPI
) -> None:
    room = await livekit_api.room.create_room(
        api.CreateRoomRequest(name="call-1", empty_timeout=60, metadata="m")
    )
    assert (room.name, room.empty_timeout, room.departure_timeout) == ("call-1", 60, 20)
    assert room.sid.startswith("RM_")
    again = await livekit_api.room.create_room(api.CreateRoomRequest(name="call-1"))
    assert again.sid == room.sid
    listed = await livekit_api.room.list_rooms(api.ListRoomsRequest())
    assert [r.name for r in listed.rooms] == ["call-1"]
    people = await livekit_api.room.list_participants(api.ListParticipantsRequest(room="call-1"))
    assert list(people.participants) == []

    d = await livekit_api.agent_dispatch.create_dispatch(
        api.CreateAgentDispatchRequest(agent_name="fleet", room="call-1", metadata='{"a":1}')
    )
    assert (d.id[:3], d.agent_name, d.metadata) == ("AD_", "fleet", '{"a":1}')
    got = await livekit_api.agent_dispatch.get_dispatch(d.id, "call-1")
    assert got is not None
    assert got.id == d.id
    names = {x.agent_name for x in await livekit_api.agent_dispatch.list_dispatch("call-1")}
    assert names == {"", "fleet"}  # the room's automatic dispatch, and ours
    deleted = await livekit_api.agent_dispatch.delete_dispatch(d.id, "call-1")
    assert deleted.id == d.id
    assert deleted.state.deleted_at > 0
    with pytest.raises(api.TwirpError) as err:
        await livekit_api.agent_dispatch.delete_dispatch(d.id, "call-1")
    assert (err.value.code, err.value.status, err.value.message) == (
        "not_found",
        404,
        "dispatch ID not found",
    )

    await livekit_api.room.delete_room(api.DeleteRoomRequest(room="call-1"))
    assert list((await livekit_api.room.list_rooms(api.ListRoomsRequest())).rooms) == []
    with pytest.raises(api.TwirpError) as err:
        await livekit_api.room.delete_room(api.DeleteRoomRequest(room="call-1"))
    assert (err.value.code, err.value.message) == ("not_found", "requested room does not exist")
    with pytest.raises(api.TwirpError) as err:
        await livekit_api.agent_dispatch.list_dispatch("call-1")
    assert err.value.code == "not_found"
    with pytest.raises(api.TwirpError) as err:
        await livekit_api.room.remove_participant(
            api.RoomParticipantIdentity(room="call-1", identity="nobody")
        )
    assert (err.value.code, err.value.message) == ("not_found", "participant does not exist")


@pytest.mark.parametrize(
    ("method", "body", "grants"),
    [
        ("RoomService/CreateRoom", {"name": "r"}, api.VideoGrants(room_list=True)),
        ("RoomService/ListRooms", {}, api.VideoGrants(room_create=True)),
        ("RoomService/DeleteRoom", {"room": "r"}, api.VideoGrants(room_admin=True, room="r")),
        ("RoomService/ListParticipants", {"room": "r"}, api.VideoGrants(room_admin=True)),
        ("RoomService/ListParticipants", {"room": "r"}, api.VideoGrants(room_create=True)),
        (
            "AgentDispatchService/CreateDispatch",
            {"room": "r", "agent_name": "a"},
            api.VideoGrants(room_admin=True, room="other"),
        ),
        ("AgentDispatchService/ListDispatch", {"room": "r"}, api.VideoGrants(room_list=True)),
    ],
)
async def test_wrong_grants_are_refused_as_livekit_refuses_them(
    standin: StandIn, method: str, body: dict[str, str], grants: api.VideoGrants
) -> None:
    """Each method's grant (`LK:pkg/service/roomservice.go`, `auth.go:L184-211`) is missing or
    for another room: Twirp ``unauthenticated`` "permissions denied", JSON body, HTTP 401."""
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            f"{standin.url}/twirp/livekit.{method}",
            json=body,
            headers={"Authorization": f"Bearer {token(grants)}"},
        ) as resp,
    ):
        assert resp.status == 401
        assert await resp.json() == {
            "code": "unauthenticated",
            "msg": "permissions denied",
            "meta": {},
        }


async def test_livekit_api_sees_a_refusal_as_a_twirp_error(standin: StandIn) -> None:
    """livekit-api's own Twirp client, with a roomAdmin grant for another room."""
    grants = api.VideoGrants(room_admin=True, room="a")
    async with aiohttp.ClientSession() as http:
        client = TwirpClient(http, standin.url, "livekit")
        with pytest.raises(api.TwirpError) as err:
            await client.request(
                "RoomService",
                "ListParticipants",
                api.ListParticipantsRequest(room="b"),
                {"Authorization": f"Bearer {token(grants)}"},
                api.ListParticipantsResponse,
            )
    assert (err.value.code, err.value.status, err.value.message) == (
        "unauthenticated",
        401,
        "permissions denied",
    )


@pytest.mark.parametrize(
    "authorization",
    [
        "Bearer not-a-jwt",
        f"Bearer {token(api.VideoGrants(room_list=True), key='unknown-key')}",
        f"Bearer {token(api.VideoGrants(room_list=True), secret=WRONG_SECRET)}",
        f"Token {token(api.VideoGrants(room_list=True))}",
    ],
)
async def test_a_bad_token_gets_a_plain_text_401(standin: StandIn, authorization: str) -> None:
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            f"{standin.url}/twirp/livekit.RoomService/ListRooms",
            data=b"",
            headers={"Authorization": authorization, "Content-Type": "application/protobuf"},
        ) as resp,
    ):
        assert resp.status == 401
        assert resp.content_type == "text/plain"


async def test_a_bad_key_is_an_unknown_error_for_livekit_api(standin: StandIn) -> None:
    async with api.LiveKitAPI(standin.url, "unknown-key", API_SECRET) as lk:
        with pytest.raises(api.TwirpError) as err:
            await lk.room.list_rooms(api.ListRoomsRequest())
    assert (err.value.code, err.value.status) == ("unknown", 401)


async def test_json_bodies_answer_with_proto_names_and_defaults(standin: StandIn) -> None:
    headers = {"Authorization": f"Bearer {token(api.VideoGrants(room_create=True))}"}
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            f"{standin.url}/twirp/livekit.RoomService/CreateRoom",
            json={"name": "r", "emptyTimeout": 30},
            headers=headers,
        ) as resp,
    ):
        room = await resp.json()
    assert resp.status == 200
    assert (room["name"], room["empty_timeout"], room["max_participants"]) == ("r", 30, 0)


async def test_unknown_method_is_a_bad_route(standin: StandIn) -> None:
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"{standin.url}/twirp/livekit.RoomService/Nope", json={}) as resp,
    ):
        assert resp.status == 404
        assert (await resp.json())["code"] == "bad_route"
