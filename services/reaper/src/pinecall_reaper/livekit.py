"""One LiveKit's RoomService as the reaper reads it (livekit-api; reference §4.2).

``ListRooms`` (``roomList``) gives every room with its participant count and creation time;
``ListParticipants`` (``roomAdmin``) says whether an agent is in one (``kind`` AGENT);
``DeleteRoom`` (``roomCreate``) takes one down: its participants leave with ROOM_DELETED and
LiveKit sends room_finished. A room that is gone is Twirp ``not_found`` on the last two.
Errors: ``LiveKitUnavailable`` when LiveKit does not answer or refuses (a bad key).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Awaitable
from typing import TypeVar

import aiohttp
from livekit import api

from pinecall_reaper.domain import RoomSeen
from pinecall_reaper.settings import LiveKit

T = TypeVar("T")


class LiveKitUnavailable(Exception):
    """LiveKit did not answer, or refused the reaper's key: nothing is judged on its view."""


def _created(room: api.Room) -> dt.datetime:
    seconds = room.creation_time_ms / 1000 if room.creation_time_ms else room.creation_time
    return dt.datetime.fromtimestamp(seconds, dt.UTC)


class Rooms:
    """The rooms of one LiveKit; close with :meth:`aclose`."""

    def __init__(self, livekit: LiveKit) -> None:
        self.livekit = livekit
        self._api: api.LiveKitAPI | None = None

    def _lk(self) -> api.LiveKitAPI:
        # made on first use, inside the running loop (livekit-api opens an aiohttp session)
        if self._api is None:
            lk = self.livekit
            self._api = api.LiveKitAPI(lk.url, lk.api_key, lk.api_secret)
        return self._api

    async def aclose(self) -> None:
        if self._api is not None:
            await self._api.aclose()

    async def _ask(self, what: str, request: Awaitable[T]) -> T | None:
        """``request``'s answer; None for Twirp ``not_found`` (the room is gone);
        ``LiveKitUnavailable`` for anything else that is not an answer."""
        try:
            return await request
        except api.ServerError as exc:
            if exc.code == api.ServerErrorCode.NOT_FOUND:
                return None
            raise LiveKitUnavailable(f"{what} on {self.livekit.url}: {exc!r}") from exc
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise LiveKitUnavailable(f"{what} on {self.livekit.url}: {exc!r}") from exc

    async def listed(self) -> dict[str, RoomSeen]:
        """Every room, by name."""
        answer = await self._ask("ListRooms", self._lk().room.list_rooms(api.ListRoomsRequest()))
        return {
            r.name: RoomSeen(name=r.name, created_at=_created(r), participants=r.num_participants)
            for r in (answer.rooms if answer is not None else [])
        }

    async def agents(self, room: str) -> int | None:
        """How many agent participants ``room`` holds; None if LiveKit has no such room."""
        request = api.ListParticipantsRequest(room=room)
        answer = await self._ask(
            f"ListParticipants {room}", self._lk().room.list_participants(request)
        )
        if answer is None:
            return None
        return sum(1 for p in answer.participants if p.kind == api.ParticipantInfo.Kind.AGENT)

    async def delete(self, room: str) -> bool:
        """Take ``room`` down; False if it was gone already (another replica, its last caller)."""
        request = api.DeleteRoomRequest(room=room)
        return (
            await self._ask(f"DeleteRoom {room}", self._lk().room.delete_room(request)) is not None
        )
