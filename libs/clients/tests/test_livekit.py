"""LiveKit's server API through :mod:`pinecall_clients.livekit`: the answers on the stand-in's real
wire, and every failure as the LiveKit tree (unavailable: retryable; refused: not; ``not_found``:
RoomGone), never an aiohttp or livekit-api type; DeleteRoom's retries of a connection error."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator, Callable

import jwt
import pytest
from aiohttp import web
from livekit import api

from pinecall_clients import roomtokens
from pinecall_clients.errors import LiveKitError
from pinecall_clients.livekit import (
    LiveKit,
    LiveKitAccess,
    LiveKitRefused,
    LiveKitUnavailable,
    RoomGone,
)
from pinecall_loadlab.livekit import StandIn
from pinecall_loadlab.livekit.callers import sip_call
from pinecall_loadlab.livekit.testing import *  # noqa: F403  (the stand-in's fixtures)
from pinecall_loadlab.livekit.testing import API_KEY, API_SECRET


def on(url: str, key: str = API_KEY) -> LiveKit:
    return LiveKit(LiveKitAccess(url=url, api_key=key, api_secret=API_SECRET))


async def test_rooms_participants_and_dispatches_on_livekit_s_own_wire(
    standin: StandIn, livekit_api: api.LiveKitAPI
) -> None:
    caller = await sip_call(
        livekit_api, standin.url, API_KEY, API_SECRET, room="call-1", fleet="pinecall", metadata="m"
    )
    try:
        async with on(standin.url) as lk:
            [room] = await lk.rooms()
            assert (room.name, room.participants) == ("call-1", 1)
            assert room.sid.startswith("RM_")
            assert abs(dt.datetime.now(dt.UTC) - room.created_at) < dt.timedelta(minutes=1)
            [person] = await lk.participants("call-1")
            assert (person.identity, person.kind) == ("sip_+15550100", "SIP")
            assert person.attributes["sip.phoneNumber"] == "+15550100"
            [ring] = await lk.dispatches("call-1")
            assert (ring.agent_name, ring.metadata, ring.jobs) == ("pinecall", "m", 0)
            assert ring.created_at_ns > 0
            made = await lk.create_dispatch("call-1", "pinecall/w.1", "{}")
            assert made in {d.id for d in await lk.dispatches("call-1")}
            assert await lk.delete_dispatch("call-1", made) is True
            assert await lk.delete_dispatch("call-1", made) is False  # gone already
            assert await lk.delete_room("call-1") is True
            assert await lk.delete_room("call-1") is False  # gone already
            with pytest.raises(RoomGone, match="ListDispatch call-1"):
                await lk.dispatches("call-1")  # CreateDispatch would make it again
            assert await lk.delete_dispatch("call-1", made) is False
            assert await lk.participants("call-1") == []  # an absent room lists nobody
            assert await lk.rooms() == []
    finally:
        await caller.leave()


async def test_a_key_livekit_does_not_know_is_refused_not_unavailable(standin: StandIn) -> None:
    async with on(standin.url, key="nobody") as lk:
        with pytest.raises(LiveKitRefused) as refused:
            await lk.rooms()
    assert not isinstance(refused.value, RoomGone)
    assert (refused.value.status, refused.value.retryable) == (401, False)
    assert "ListRooms" in str(refused.value)


async def test_a_livekit_that_does_not_answer_is_unavailable() -> None:
    async with on("http://127.0.0.1:9") as lk:
        with pytest.raises(LiveKitUnavailable) as unavailable:
            await lk.participants("call-1")
    assert (unavailable.value.status, unavailable.value.retryable) == (None, True)
    assert str(unavailable.value).startswith("ListParticipants call-1 on http://127.0.0.1:9")


Answer = Callable[[web.Request], web.StreamResponse]


@pytest.fixture
async def scripted() -> AsyncIterator[tuple[str, list[Answer], list[str]]]:
    """A Twirp server that answers each request with the next of a script; the paths asked."""
    script: list[Answer] = []
    asked: list[str] = []

    async def handle(request: web.Request) -> web.StreamResponse:
        asked.append(request.path)
        return script.pop(0)(request)

    app = web.Application()
    app.router.add_post("/twirp/{method:.*}", handle)
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    yield f"http://127.0.0.1:{runner.addresses[0][1]}", script, asked
    await runner.cleanup()


def twirp(status: int, code: str) -> Answer:
    return lambda _: web.json_response({"code": code, "msg": "said"}, status=status)


def hang_up(request: web.Request) -> web.StreamResponse:
    """Close the connection without an answer (aiohttp's ServerDisconnectedError)."""
    assert request.transport is not None
    request.transport.close()
    return web.Response()


def deleted(_: web.Request) -> web.StreamResponse:
    return web.Response(body=api.DeleteRoomResponse().SerializeToString())


@pytest.mark.parametrize(
    ("status", "code", "kind"),
    [
        (503, "unavailable", LiveKitUnavailable),
        (500, "internal", LiveKitUnavailable),
        (429, "resource_exhausted", LiveKitUnavailable),
        (401, "unauthenticated", LiveKitRefused),
        (403, "permission_denied", LiveKitRefused),
        (400, "invalid_argument", LiveKitRefused),
        (404, "not_found", RoomGone),
    ],
)
async def test_each_twirp_answer_is_one_of_the_tree(
    scripted: tuple[str, list[Answer], list[str]],
    status: int,
    code: str,
    kind: type[LiveKitError],
) -> None:
    url, script, _ = scripted
    script.append(twirp(status, code))
    async with on(url) as lk:
        with pytest.raises(LiveKitError) as error:
            await lk.create_dispatch("call-1", "pinecall/w.1", "{}")
    assert type(error.value) is kind
    assert error.value.status == status
    assert error.value.retryable is (kind is LiveKitUnavailable)
    assert f"CreateDispatch call-1 on {url}: LiveKit answered {status} {code}: said" == str(
        error.value
    )


def listed(bearers: list[str]) -> Answer:
    """An empty ListDispatch answer; the request's token kept in ``bearers``."""

    def answer(request: web.Request) -> web.StreamResponse:
        bearers.append(request.headers["Authorization"].removeprefix("Bearer "))
        return web.Response(body=api.ListAgentDispatchResponse().SerializeToString())

    return answer


async def test_a_room_s_calls_carry_one_token_of_that_room_alone(
    scripted: tuple[str, list[Answer], list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, script, _ = scripted
    bearers: list[str] = []
    script.extend([listed(bearers)] * 3)
    signed: list[str] = []
    to_jwt = api.AccessToken.to_jwt

    def signing(token: api.AccessToken) -> str:
        signed.append(made := to_jwt(token))
        return made

    monkeypatch.setattr(api.AccessToken, "to_jwt", signing)
    async with on(url) as lk:
        for room in ("call-1", "call-2", "call-1"):
            assert await lk.dispatches(room) == []
    first, second, again = bearers
    assert signed == [first, second]  # signed once a room, not once a call
    assert again == first
    verify = api.TokenVerifier(API_KEY, API_SECRET).verify
    for token, room in ((first, "call-1"), (second, "call-2")):
        grants = verify(token).video
        assert grants is not None
        assert (grants.room_admin, grants.room) == (True, room)
        assert not any((grants.room_create, grants.room_list, grants.room_join))
    claims = jwt.decode(first, options={"verify_signature": False})
    life = claims["exp"] - claims["nbf"]  # whole seconds, each read off its own clock reading
    assert life in (roomtokens.TTL.total_seconds(), roomtokens.TTL.total_seconds() + 1)


async def test_delete_room_retries_a_connection_error_within_its_time(
    scripted: tuple[str, list[Answer], list[str]],
) -> None:
    url, script, asked = scripted
    script.extend([hang_up, hang_up, deleted])
    async with on(url) as lk, asyncio.timeout(30):
        assert await lk.delete_room("call-1", retry_s=20.0) is True
    assert asked == ["/twirp/livekit.RoomService/DeleteRoom"] * 3


async def test_delete_room_retries_nothing_but_a_connection_error(
    scripted: tuple[str, list[Answer], list[str]],
) -> None:
    url, script, asked = scripted
    script.extend([twirp(503, "unavailable"), deleted])
    async with on(url) as lk:
        with pytest.raises(LiveKitUnavailable, match="DeleteRoom call-1"):
            await lk.delete_room("call-1", retry_s=20.0)
    assert len(asked) == 1


async def test_without_retry_s_a_connection_error_is_unavailable_at_once(
    scripted: tuple[str, list[Answer], list[str]],
) -> None:
    url, script, asked = scripted
    script.extend([hang_up, deleted])
    async with on(url) as lk:
        with pytest.raises(LiveKitUnavailable, match="did not answer"):
            await lk.delete_room("call-1")
    assert len(asked) == 1


async def test_delete_room_gives_up_when_its_time_is_out() -> None:
    async with on("http://127.0.0.1:9") as lk, asyncio.timeout(30):
        with pytest.raises(LiveKitUnavailable, match="DeleteRoom call-1"):
            await lk.delete_room("call-1", retry_s=0.5)
