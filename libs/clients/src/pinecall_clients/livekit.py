"""One LiveKit's server API as the runtime calls it: Twirp RoomService, AgentDispatchService and
the SIP service's trunks (inbound and outbound) and rules through livekit-api (``shared/reference/livekit-protocol.md``
§4; livekit/protocol ``livekit_sip.proto``), for the dispatcher, the reaper and the sentence job.

    async with LiveKit(LiveKitAccess(url=url, api_key=key, api_secret=secret)) as lk:
        people = await lk.participants("call-1")     # RoomGone if LiveKit has no such room

A LiveKit is reached with one :class:`LiveKitAccess` (its URL, an API key and its secret); the
key needs the grants of the methods called (§4.2: ``roomList`` for ListRooms, ``roomCreate`` for
DeleteRoom, ``roomAdmin`` of the room for ListParticipants and the dispatches). Answers are this
module's own small types (:class:`Room`, :class:`Participant`, :class:`Dispatch`), with LiveKit's
enum names as strings (a participant's kind ``STANDARD``, ``SIP``, ``AGENT``, as
:class:`pinecall_contracts.livekit.LiveKitEvent` names it).

Errors (:mod:`pinecall_clients.errors`, the LiveKit tree): :class:`LiveKitUnavailable` (retryable:
nothing answered within the timeout, the connection failed, or LiveKit answered 408, 429 or 5xx)
and :class:`LiveKitRefused` (not: any other 4xx, or an access with no key); Twirp ``not_found`` is
:class:`RoomGone`, a refusal. No aiohttp or livekit-api exception escapes.

Nothing here retries unless asked: :meth:`LiveKit.delete_room` with ``retry_s`` retries a
connection error (stamina).

A call on one room (ListParticipants, the dispatches) carries that room's token, signed once a
room (:mod:`pinecall_clients.roomtokens`); livekit-api signs the others each time.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import TypeVar

import aiohttp
import stamina
from livekit import api

from pinecall_clients.errors import LiveKitError, LiveKitRefused, LiveKitUnavailable, RoomGone
from pinecall_clients.livekit_types import (
    Dispatch,
    LiveKitAccess,
    Participant,
    Room,
    Trunk,
    created,
    kind_name,
)
from pinecall_clients.roomtokens import RoomTokens

T = TypeVar("T")

TIMEOUT_S = 10.0
"""livekit-api's own total timeout of one request, in seconds."""
RETRYABLE_STATUSES = frozenset({408, 429})
"""4xx answers that say "not now" rather than "no" (Twirp ``deadline_exceeded``, ``canceled``,
``resource_exhausted``); every 5xx is retryable too."""

__all__ = [
    "Dispatch",
    "LiveKit",
    "LiveKitAccess",
    "LiveKitError",
    "LiveKitRefused",
    "LiveKitUnavailable",
    "Participant",
    "Room",
    "RoomGone",
    "Trunk",
]


class LiveKit:
    """One LiveKit's server API; close with :meth:`aclose` (or use it as a context manager).

    ``timeout_s`` bounds each request (livekit-api's total timeout); ``failover`` is
    livekit-api's region failover, which only LiveKit Cloud hosts use.
    """

    def __init__(
        self, access: LiveKitAccess, *, timeout_s: float = TIMEOUT_S, failover: bool = True
    ) -> None:
        self.access = access
        self.timeout_s = timeout_s
        self.failover = failover
        self._api: api.LiveKitAPI | None = None
        self._session: aiohttp.ClientSession | None = None
        self._rooms = RoomTokens(access, failover=failover)

    async def __aenter__(self) -> LiveKit:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        self._api = None
        self._rooms.clear()
        if self._session is not None:
            made, self._session = self._session, None
            await made.close()

    def _lk(self, what: str) -> api.LiveKitAPI:
        # made on first use, inside the running loop (an aiohttp session is opened here, closed
        # by aclose: livekit-api leaves a session it was given to its owner)
        if self._api is None:
            a = self.access
            if self._session is None:
                self._session = aiohttp.ClientSession(
                    timeout=aiohttp.ClientTimeout(total=self.timeout_s)
                )
            try:
                self._api = api.LiveKitAPI(
                    a.url, a.api_key, a.api_secret, session=self._session, failover=self.failover
                )
            except ValueError as exc:  # no URL, or no key and secret
                raise LiveKitRefused(f"{what} on {a.url or '(no URL)'}: {exc}") from exc
        return self._api

    async def _ask(
        self,
        method: str,
        room: str | None,
        request: Callable[[api.LiveKitAPI], Awaitable[T]],
        *,
        retry_s: float = 0.0,
        room_token: bool = False,
    ) -> T:
        """``request``'s answer, or the error of the LiveKit tree that says why there is none;
        with ``retry_s``, a connection error is retried for that many seconds first. With
        ``room_token``, the call is sent with ``room``'s token (:class:`RoomTokens`)."""
        what = f"{method} {room}" if room else method
        lk = self._lk(what)  # the access checked and the session opened, once
        if room_token and room:
            assert self._session is not None
            lk = self._rooms.of(room, self._session)
        try:
            if not retry_s:
                return await request(lk)
            retrying = stamina.retry_context(
                on=aiohttp.ClientError,
                attempts=None,
                timeout=retry_s,
                wait_initial=0.2,
                wait_max=2.0,
            ).with_name(f"LiveKit {method}", (), {"room": room})  # what a retry's log line says
            async for attempt in retrying:
                with attempt:
                    return await request(lk)
            raise AssertionError("stamina stopped retrying without an error")  # never reached
        except api.ServerError as exc:
            raise _answered(f"{what} on {self.access.url}", exc) from exc
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise LiveKitUnavailable(
                f"{what} on {self.access.url}: LiveKit did not answer ({exc!r})"
            ) from exc

    # -- RoomService ------------------------------------------------------------------------

    async def rooms(self) -> list[Room]:
        """Every room (ListRooms)."""
        request = api.ListRoomsRequest()
        answer = await self._ask("ListRooms", None, lambda lk: lk.room.list_rooms(request))
        return [
            Room(
                name=r.name,
                sid=r.sid,
                created_at=created(r),
                participants=r.num_participants,
            )
            for r in answer.rooms
        ]

    async def participants(self, room: str) -> list[Participant]:
        """Who is in ``room`` now (ListParticipants); ``RoomGone`` if LiveKit has no such room."""
        request = api.ListParticipantsRequest(room=room)
        answer = await self._ask(
            "ListParticipants", room, lambda lk: lk.room.list_participants(request), room_token=True
        )
        return [
            Participant(identity=p.identity, kind=kind_name(p.kind), attributes=dict(p.attributes))
            for p in answer.participants
        ]

    async def create_room(
        self, room: str, *, agent_name: str, metadata: str, empty_timeout_s: int = 0
    ) -> str:
        """Make ``room`` with a dispatch of ``agent_name`` carrying ``metadata`` (CreateRoom with
        ``agents``: the way a ring is made when nobody joins first, as an outbound call's);
        its sid. A room already there is answered as it is (LiveKit's CreateRoom). A room
        nobody joins is closed by LiveKit after ``empty_timeout_s`` (0: LiveKit's default)."""
        request = api.CreateRoomRequest(
            name=room,
            empty_timeout=empty_timeout_s,
            agents=[api.RoomAgentDispatch(agent_name=agent_name, metadata=metadata)],
        )
        made = await self._ask("CreateRoom", room, lambda lk: lk.room.create_room(request))
        return str(made.sid)

    async def delete_room(self, room: str, *, retry_s: float = 0.0) -> bool:
        """Take ``room`` down (DeleteRoom): its participants leave with ROOM_DELETED and LiveKit
        sends room_finished. True if deleted, False if LiveKit no longer had it.

        With ``retry_s``, a connection error (``aiohttp.ClientError``) is retried (stamina,
        0.2 s doubling to 2 s) for that many seconds before ``LiveKitUnavailable``.
        """
        request = api.DeleteRoomRequest(room=room)
        try:
            await self._ask(
                "DeleteRoom", room, lambda lk: lk.room.delete_room(request), retry_s=retry_s
            )
        except RoomGone:
            return False
        return True

    # -- SIP: an org's numbers (issue 18) ------------------------------------------------------

    async def inbound_trunks(self, number: str) -> dict[str, str]:
        """The inbound SIP trunks holding ``number`` (ListSIPInboundTrunk): id → name."""
        request = api.ListSIPInboundTrunkRequest(numbers=[number])
        found = await self._ask(
            "ListSIPInboundTrunk", None, lambda lk: lk.sip.list_inbound_trunk(request)
        )
        return {str(t.sip_trunk_id): str(t.name) for t in found.items}

    async def create_inbound_trunk(self, number: str, *, name: str, metadata: str) -> str:
        """An inbound SIP trunk holding ``number`` (CreateSIPInboundTrunk); its id.
        ``LiveKitRefused`` when another trunk holds the number."""
        trunk = api.SIPInboundTrunkInfo(numbers=[number], name=name, metadata=metadata)
        request = api.CreateSIPInboundTrunkRequest(trunk=trunk)
        made = await self._ask(
            "CreateSIPInboundTrunk", None, lambda lk: lk.sip.create_inbound_trunk(request)
        )
        return str(made.sip_trunk_id)

    async def create_dispatch_rule(
        self, trunk_id: str, *, agent_name: str, ring: str, name: str, room_prefix: str
    ) -> str:
        """A dispatch rule of ``trunk_id`` (CreateSIPDispatchRule): each caller in a room of
        their own (Individual, ``<room_prefix>_<caller>_<random>``) dispatched to
        ``agent_name`` with ``ring`` as the dispatch's metadata; its id."""
        rule = api.SIPDispatchRuleInfo(
            name=name,
            trunk_ids=[trunk_id],
            rule=api.SIPDispatchRule(
                dispatch_rule_individual=api.SIPDispatchRuleIndividual(room_prefix=room_prefix)
            ),
            room_config=api.RoomConfiguration(
                agents=[api.RoomAgentDispatch(agent_name=agent_name, metadata=ring)]
            ),
        )
        request = api.CreateSIPDispatchRuleRequest(dispatch_rule=rule)
        made = await self._ask(
            "CreateSIPDispatchRule", None, lambda lk: lk.sip.create_dispatch_rule(request)
        )
        return str(made.sip_dispatch_rule_id)

    async def delete_trunk(self, trunk_id: str) -> bool:
        """Delete a SIP trunk (DeleteSIPTrunk); False if LiveKit had none of that id."""
        request = api.DeleteSIPTrunkRequest(sip_trunk_id=trunk_id)
        try:
            await self._ask("DeleteSIPTrunk", None, lambda lk: lk.sip.delete_trunk(request))
        except RoomGone:  # Twirp not_found, whatever was not found
            return False
        return True

    async def delete_dispatch_rule(self, rule_id: str) -> bool:
        """Delete a SIP dispatch rule (DeleteSIPDispatchRule); False if LiveKit had none."""
        request = api.DeleteSIPDispatchRuleRequest(sip_dispatch_rule_id=rule_id)
        try:
            await self._ask(
                "DeleteSIPDispatchRule", None, lambda lk: lk.sip.delete_dispatch_rule(request)
            )
        except RoomGone:
            return False
        return True

    # -- AgentDispatchService ---------------------------------------------------------------

    async def dispatches(self, room: str) -> list[Dispatch]:
        """The room's dispatches (ListDispatch); ``RoomGone`` when the room is not active (the
        server's ``agent_dispatch_service.go``), which is how a caller never creates a dispatch
        on a room that is gone: CreateDispatch would make the room again."""
        found = await self._ask(
            "ListDispatch", room, lambda lk: lk.agent_dispatch.list_dispatch(room), room_token=True
        )
        return [
            Dispatch(
                id=d.id,
                agent_name=d.agent_name,
                metadata=d.metadata,
                created_at_ns=d.state.created_at,
                jobs=len(d.state.jobs),
            )
            for d in found
        ]

    async def create_dispatch(self, room: str, agent_name: str, metadata: str) -> str:
        """A dispatch of ``agent_name`` to ``room`` (CreateDispatch); its id."""
        request = api.CreateAgentDispatchRequest(
            room=room, agent_name=agent_name, metadata=metadata
        )
        made = await self._ask(
            "CreateDispatch",
            room,
            lambda lk: lk.agent_dispatch.create_dispatch(request),
            room_token=True,
        )
        return str(made.id)

    async def delete_dispatch(self, room: str, dispatch_id: str) -> bool:
        """Delete a dispatch (DeleteDispatch; its job is terminated). True if deleted, False if
        the room or the dispatch was gone already."""
        try:
            await self._ask(
                "DeleteDispatch",
                room,
                lambda lk: lk.agent_dispatch.delete_dispatch(dispatch_id, room),
                room_token=True,
            )
        except RoomGone:
            return False
        return True

    # -- SIPService ---------------------------------------------------------------------------

    async def outbound_trunks(self) -> list[Trunk]:
        """The SIP outbound trunks (ListSIPOutboundTrunk)."""
        found = await self._ask(
            "ListSIPOutboundTrunk",
            None,
            lambda lk: lk.sip.list_outbound_trunk(api.ListSIPOutboundTrunkRequest()),
        )
        return [
            Trunk(id=t.sip_trunk_id, name=t.name, numbers=tuple(t.numbers)) for t in found.items
        ]


def _answered(what: str, exc: api.ServerError) -> LiveKitError:
    """The error of a Twirp answer that is not a success (livekit-api's ``ServerError``)."""
    detail = f"{what}: LiveKit answered {exc.status} {exc.code}: {exc.message}".rstrip(": ")
    if exc.code == api.ServerErrorCode.NOT_FOUND:
        return RoomGone(detail, exc.status)
    if exc.status >= 500 or exc.status in RETRYABLE_STATUSES:
        return LiveKitUnavailable(detail, exc.status)
    return LiveKitRefused(detail, exc.status)
