"""Twirp RoomService and AgentDispatchService, with LiveKit's grant checks and error bodies.

Follows `LK:pkg/service/roomservice.go`, `LK:pkg/service/agent_dispatch_service.go` and the twirp
server code generated in `PR:livekit/livekit_room.twirp.go`:

- ``POST /twirp/livekit.<Service>/<Method>``; other verbs and unknown routes → ``bad_route``;
- bodies in ``application/protobuf`` or ``application/json`` (answers in kind; JSON answers use
  proto field names and print defaults);
- a malformed token, unknown key or bad signature → 401 plain text (the auth middleware); a
  missing or insufficient grant → Twirp ``unauthenticated`` "permissions denied";
- errors are Twirp JSON ``{"code", "msg", "meta"}`` with the code's HTTP status.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from google.protobuf import json_format
from google.protobuf.message import DecodeError, Message
from livekit.api.access_token import Claims
from livekit.protocol import agent_dispatch as ad
from livekit.protocol import models
from livekit.protocol import room as rm

from . import ids
from .agent_ws import plain_401
from .rooms import Reason, RoomManager
from .tokens import AuthError, KeyRing, request_token

STATUS = {
    "not_found": 404,
    "unauthenticated": 401,
    "permission_denied": 403,
    "invalid_argument": 400,
    "bad_route": 404,
    "malformed": 400,
    "internal": 500,
    "already_exists": 409,
    "failed_precondition": 412,
    "resource_exhausted": 429,
    "canceled": 408,
    "deadline_exceeded": 408,
    "aborted": 409,
    "unavailable": 503,
}


class TwirpError(Exception):
    """A Twirp error: `code` (``not_found``…), `msg` and string `meta` (a SIP failure's
    ``sip_status_code`` and ``sip_status``, as `PR:livekit/sip.go` ``TwirpErrorMeta`` puts
    them); rendered with the code's HTTP status."""

    def __init__(self, code: str, msg: str, meta: dict[str, str] | None = None) -> None:
        super().__init__(msg)
        self.code, self.msg, self.meta = code, msg, dict(meta or {})

    def response(self) -> web.Response:
        return web.json_response(
            {"code": self.code, "msg": self.msg, "meta": self.meta},
            status=STATUS.get(self.code, 500),
        )


DENIED = TwirpError("unauthenticated", "permissions denied")
ROOM_NOT_FOUND = TwirpError("not_found", "requested room does not exist")


def _create(c: Claims | None) -> None:
    if not (c and c.video and c.video.room_create):
        raise DENIED


def _list(c: Claims | None) -> None:
    if not (c and c.video and c.video.room_list):
        raise DENIED


def _admin(c: Claims | None, room: str) -> None:
    if not (c and c.video and c.video.room_admin and c.video.room == room):
        raise DENIED


def deterministic_id(prefix: str, request_id: str) -> str:
    """`DeterministicID`: the same request id (a client's retry) gives the same dispatch id."""
    if not request_id:
        return ids.new_id(prefix)
    return prefix + hashlib.sha256(request_id.encode()).hexdigest()[:12]


Handler = Callable[[Any, Claims | None, web.Request], Awaitable[Message]]
Routes = dict[tuple[str, str], tuple[type[Message], Handler]]
"""``(service, method)`` → (request type, handler): what a service adds to `Twirp.routes`."""


class Twirp:
    """aiohttp handler for ``/twirp/{service}/{method}``."""

    def __init__(self, rooms: RoomManager, keys: KeyRing) -> None:
        self.rooms, self.keys = rooms, keys
        self.routes: Routes = {
            ("livekit.RoomService", "CreateRoom"): (rm.CreateRoomRequest, self.create_room),
            ("livekit.RoomService", "ListRooms"): (rm.ListRoomsRequest, self.list_rooms),
            ("livekit.RoomService", "DeleteRoom"): (rm.DeleteRoomRequest, self.delete_room),
            ("livekit.RoomService", "ListParticipants"): (
                rm.ListParticipantsRequest,
                self.list_participants,
            ),
            ("livekit.RoomService", "GetParticipant"): (
                rm.RoomParticipantIdentity,
                self.get_participant,
            ),
            ("livekit.RoomService", "RemoveParticipant"): (
                rm.RoomParticipantIdentity,
                self.remove_participant,
            ),
            ("livekit.AgentDispatchService", "CreateDispatch"): (
                ad.CreateAgentDispatchRequest,
                self.create_dispatch,
            ),
            ("livekit.AgentDispatchService", "ListDispatch"): (
                ad.ListAgentDispatchRequest,
                self.list_dispatch,
            ),
            ("livekit.AgentDispatchService", "DeleteDispatch"): (
                ad.DeleteAgentDispatchRequest,
                self.delete_dispatch,
            ),
        }

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """Authenticate, decode, call the method and encode its answer or error."""
        route = self.routes.get((request.match_info["service"], request.match_info["method"]))
        if request.method != "POST" or route is None:
            return TwirpError("bad_route", f"no handler for path {request.path}").response()
        try:
            token = request_token(
                request.headers.get("Authorization"), request.query.get("access_token")
            )
            claims = self.keys.verify(token)[1] if token else None
        except AuthError as exc:
            return plain_401(str(exc))
        req_type, handler = route
        is_json = request.content_type == "application/json"
        body = await request.read()
        try:
            req = req_type()
            if is_json:
                json_format.Parse(body or b"{}", req, ignore_unknown_fields=True)
            else:
                req.ParseFromString(body)
        except (DecodeError, json_format.ParseError) as exc:
            return TwirpError("malformed", f"failed to parse request: {exc}").response()
        try:
            res = await handler(req, claims, request)
        except TwirpError as exc:
            return exc.response()
        if is_json:
            text = json_format.MessageToJson(
                res,
                preserving_proto_field_name=True,
                indent=None,
                always_print_fields_with_no_presence=True,
            )
            return web.Response(text=text, content_type="application/json")
        return web.Response(body=res.SerializeToString(), content_type="application/protobuf")

    # -- RoomService ---------------------------------------------------------------------------

    async def create_room(
        self, req: rm.CreateRoomRequest, c: Claims | None, _: web.Request
    ) -> Message:
        """`roomCreate`; an existing room is returned as it is (its dispatches unchanged)."""
        _create(c)
        if not req.name:
            raise TwirpError("invalid_argument", "no room name")
        room, _created = self.rooms.create_room(
            req.name,
            empty_timeout=req.empty_timeout,
            departure_timeout=req.departure_timeout,
            max_participants=req.max_participants,
            metadata=req.metadata,
            agents=req.agents,
        )
        return room.proto

    async def list_rooms(
        self, req: rm.ListRoomsRequest, c: Claims | None, _: web.Request
    ) -> Message:
        _list(c)
        names = set(req.names)
        rooms = [r.proto for r in self.rooms.rooms.values() if not names or r.name in names]
        return rm.ListRoomsResponse(rooms=rooms)

    async def delete_room(
        self, req: rm.DeleteRoomRequest, c: Claims | None, _: web.Request
    ) -> Message:
        """`roomCreate`; participants leave with ROOM_DELETED, then room_finished."""
        _create(c)
        if not self.rooms.delete_room(req.room):
            raise ROOM_NOT_FOUND
        return rm.DeleteRoomResponse()

    async def list_participants(
        self, req: rm.ListParticipantsRequest, c: Claims | None, _: web.Request
    ) -> Message:
        """`roomAdmin` on the room; an absent room lists nobody (`LocalStore`)."""
        _admin(c, req.room)
        room = self.rooms.rooms.get(req.room)
        people = [p.info for p in room.participants.values()] if room else []
        return rm.ListParticipantsResponse(participants=people)

    async def get_participant(
        self, req: rm.RoomParticipantIdentity, c: Claims | None, _: web.Request
    ) -> Message:
        _admin(c, req.room)
        room = self.rooms.rooms.get(req.room)
        if room is None or req.identity not in room.participants:
            raise TwirpError("not_found", "participant does not exist")
        info: models.ParticipantInfo = room.participants[req.identity].info
        return info

    async def remove_participant(
        self, req: rm.RoomParticipantIdentity, c: Claims | None, _: web.Request
    ) -> Message:
        """`roomAdmin`; the participant leaves with PARTICIPANT_REMOVED."""
        _admin(c, req.room)
        room = self.rooms.rooms.get(req.room)
        if room is None or req.identity not in room.participants:
            raise TwirpError("not_found", "participant does not exist")
        self.rooms.remove(room, room.participants[req.identity], Reason.PARTICIPANT_REMOVED)
        return rm.RemoveParticipantResponse()

    # -- AgentDispatchService ------------------------------------------------------------------

    async def create_dispatch(
        self, req: ad.CreateAgentDispatchRequest, c: Claims | None, request: web.Request
    ) -> Message:
        """`roomAdmin` on the room; auto-creates the room (with its default dispatch), then adds
        this dispatch and starts its JobRequest. Answers before any worker is offered the job."""
        _admin(c, req.room)
        room, _created = self.rooms.create_room(req.room)
        dispatch_id = deterministic_id(
            ids.DISPATCH, request.headers.get("X-Livekit-Request-Id", "")
        )
        if (existing := room.dispatches.get(dispatch_id)) is not None:
            return existing
        return self.rooms.add_dispatch(room, req, dispatch_id=dispatch_id)

    async def list_dispatch(
        self, req: ad.ListAgentDispatchRequest, c: Claims | None, _: web.Request
    ) -> Message:
        _admin(c, req.room)
        room = self.rooms.rooms.get(req.room)
        if room is None:
            raise ROOM_NOT_FOUND
        found = [
            d
            for d in self.rooms.dispatches_of(room)
            if not req.dispatch_id or d.id == req.dispatch_id
        ]
        return ad.ListAgentDispatchResponse(agent_dispatches=found)

    async def delete_dispatch(
        self, req: ad.DeleteAgentDispatchRequest, c: Claims | None, _: web.Request
    ) -> Message:
        """`roomAdmin`; its running jobs get `JobTermination`."""
        _admin(c, req.room)
        room = self.rooms.rooms.get(req.room)
        if room is None:
            raise ROOM_NOT_FOUND
        d = self.rooms.delete_dispatch(room, req.dispatch_id)
        if d is None:
            raise TwirpError("not_found", "dispatch ID not found")
        return d
