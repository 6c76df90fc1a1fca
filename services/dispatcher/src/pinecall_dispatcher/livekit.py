"""Each environment's LiveKit, through livekit-api (Twirp AgentDispatchService and RoomService).

A room lives on the LiveKit of its fleet's environment: the fleets row's ``livekit_url``, with
that environment's keys. ListDispatch answers ``not_found`` for a room that is not active (its
server's ``agent_dispatch_service.go``): that is how the dispatcher never creates a dispatch on a
room that is gone, since CreateDispatch would make the room again.

Errors::

    RoomGone (not_found: the room is not active)
    LiveKitUnavailable (Unavailable, 503, retryable: LiveKit did not answer or answered 5xx)
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TypeVar

import aiohttp
from livekit import api
from livekit.protocol.agent_dispatch import AgentDispatch
from livekit.protocol.models import ParticipantInfo

from pinecall_servicekit.errors import Unavailable

T = TypeVar("T")
TIMEOUT_S = 5.0
"""A Twirp call that takes longer is a LiveKit that does not answer."""


class RoomGone(Exception):
    """The room is not active on its LiveKit."""


class LiveKitUnavailable(Unavailable):
    code = "livekit_unavailable"


class LiveKit:
    """One environment's LiveKit."""

    def __init__(self, url: str, key: str, secret: str) -> None:
        self.url, self.key, self.secret = url, key, secret
        self._api = api.LiveKitAPI(
            url, key, secret, timeout=aiohttp.ClientTimeout(total=TIMEOUT_S), failover=False
        )

    async def aclose(self) -> None:
        await self._api.aclose()

    async def _call(self, what: str, coro: Awaitable[T]) -> T:
        try:
            return await coro
        except api.TwirpError as exc:
            if exc.code == api.TwirpErrorCode.NOT_FOUND:
                raise RoomGone(f"{what}: {exc.message}") from exc
            raise LiveKitUnavailable(f"{what}: LiveKit answered {exc.code}: {exc.message}") from exc
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise LiveKitUnavailable(f"{what}: LiveKit at {self.url} did not answer") from exc

    async def dispatches(self, room: str) -> list[AgentDispatch]:
        """The room's dispatches; ``RoomGone`` when the room is not active."""
        found = await self._call("ListDispatch", self._api.agent_dispatch.list_dispatch(room))
        return found

    async def participants(self, room: str) -> list[ParticipantInfo]:
        """Who is in the room now (an absent room lists nobody)."""
        res = await self._call(
            "ListParticipants",
            self._api.room.list_participants(api.ListParticipantsRequest(room=room)),
        )
        return list(res.participants)

    async def create_dispatch(self, room: str, agent_name: str, metadata: str) -> str:
        """A dispatch of ``agent_name`` to ``room``; its id."""
        d = await self._call(
            "CreateDispatch",
            self._api.agent_dispatch.create_dispatch(
                api.CreateAgentDispatchRequest(room=room, agent_name=agent_name, metadata=metadata)
            ),
        )
        return str(d.id)

    async def delete_dispatch(self, room: str, dispatch_id: str) -> None:
        """Delete a dispatch (its job is terminated); a room or dispatch already gone is fine."""
        try:
            await self._call(
                "DeleteDispatch", self._api.agent_dispatch.delete_dispatch(dispatch_id, room)
            )
        except RoomGone:
            return


class LiveKits:
    """The LiveKit of each environment, made on first use from its URL and keys."""

    def __init__(self, keys: dict[str, tuple[str, str]]) -> None:
        self.keys = keys
        self._by_environment: dict[str, LiveKit] = {}
        self._retired: list[LiveKit] = []

    def of(self, environment: str, url: str) -> LiveKit:
        """``environment``'s LiveKit at ``url``; ``LiveKitUnavailable`` without its keys."""
        known = self._by_environment.get(environment)
        if known is not None and known.url == url:
            return known
        if environment not in self.keys:
            raise LiveKitUnavailable(f"no LiveKit keys for environment {environment!r}")
        if known is not None:
            self._retired.append(known)  # its fleets row names another URL now
        key, secret = self.keys[environment]
        made = self._by_environment[environment] = LiveKit(url, key, secret)
        return made

    async def aclose(self) -> None:
        for lk in [*self._by_environment.values(), *self._retired]:
            await lk.aclose()
        self._by_environment.clear()
        self._retired.clear()
