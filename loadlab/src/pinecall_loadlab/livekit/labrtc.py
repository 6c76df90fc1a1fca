"""The lab-room transport, server side: presence and PCM audio without WebRTC or an SFU.

Wire (the client is `pinecall_labroom`): ``GET /lab/rtc`` WebSocket with a real LiveKit access
token (``Authorization: Bearer`` or ``?access_token=``) holding ``roomJoin`` for ``room`` and an
identity; ``kind`` and ``attributes`` come from the token. A join creates the room if absent, and
only then the token's ``roomConfig.agents`` dispatches apply (`LK:pkg/service/roommanager.go:L644`).

- server → client text: ``{"type": "joined", "room", "participant", "participants",
  "sample_rate": 48000, "channels": 1}`` first; then ``participant_joined`` / ``participant_left``
  (with ``reason``) / ``participant_attributes_changed`` for the others; ``removed`` (with ``reason``) before the server closes;
- client → server text: ``{"type": "leave"}``, a clean goodbye (CLIENT_INITIATED);
- binary: 16-bit little-endian PCM, 48 kHz mono, one 10–20 ms frame per message; relayed at once
  to every other participant as ``u8 len | sender identity (utf-8) | pcm``.

A socket that ends without a goodbye is a lost connection: the participant leaves with
CONNECTION_TIMEOUT `connection_timeout_s` later (`disconnectCleanupDuration`, 5 s). So is a
participant that stops answering the transport's pings (a stopped process, a frozen machine): the
socket is closed after at most `transport_timeout_s` (WebRTC's consent freshness stands behind it
on a real server), and the same 5 s follow.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import Any

from aiohttp import WSMsgType, web
from livekit.protocol import models

from .agent_ws import plain_401
from .rooms import KINDS, Ears, Participant, Reason, Room, RoomManager
from .tokens import AuthError, KeyRing, request_token

log = logging.getLogger(__name__)

SAMPLE_RATE = 48000
CHANNELS = 1
MAX_FRAME_BYTES = SAMPLE_RATE // 50 * 2 * CHANNELS
"""20 ms of 16-bit mono at 48 kHz."""


def describe(info: models.ParticipantInfo) -> dict[str, Any]:
    """A participant as the transport's JSON shows it."""
    return {
        "identity": info.identity,
        "sid": info.sid,
        "name": info.name,
        "kind": models.ParticipantInfo.Kind.Name(info.kind),
        "attributes": dict(info.attributes),
    }


class LabLink:
    """One participant's socket; implements `rooms.Link`."""

    def __init__(self, ws: web.WebSocketResponse, request: web.Request) -> None:
        self.ws = ws
        self.request = request
        self.outbox: asyncio.Queue[str | bytes | None] = asyncio.Queue()
        self.goodbye = False
        self.writer = asyncio.create_task(self._write())

    def presence(self, event: str, info: models.ParticipantInfo) -> None:
        msg: dict[str, Any] = {"type": event, "participant": describe(info)}
        if event == "participant_left":
            msg["reason"] = models.DisconnectReason.Name(info.disconnect_reason)
        self.outbox.put_nowait(json.dumps(msg))

    def removed(self, reason: int) -> None:
        self.outbox.put_nowait(
            json.dumps({"type": "removed", "reason": models.DisconnectReason.Name(reason)})
        )
        self.outbox.put_nowait(None)

    def audio(self, sender: str, pcm: bytes) -> None:
        name = sender.encode()
        self.outbox.put_nowait(bytes([len(name)]) + name + pcm)

    def cut(self) -> None:
        """Drop the TCP connection without a close frame."""
        if self.request.transport is not None:
            self.request.transport.abort()

    async def _write(self) -> None:
        with contextlib.suppress(ConnectionError, RuntimeError):
            while (item := await self.outbox.get()) is not None:
                if isinstance(item, bytes):
                    await self.ws.send_bytes(item)
                else:
                    await self.ws.send_str(item)
            await self.ws.close()


class LabTransport:
    """aiohttp handler for ``GET /lab/rtc``."""

    def __init__(self, rooms: RoomManager, keys: KeyRing) -> None:
        self.rooms, self.keys = rooms, keys
        self.sockets: set[web.WebSocketResponse] = set()
        self.links: dict[tuple[str, str], LabLink] = {}

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """Verify the token, join the room, relay audio until the socket ends."""
        try:
            token = request_token(
                request.headers.get("Authorization"), request.query.get("access_token")
            )
            if token is None:
                return plain_401("permissions denied")
            _, claims = self.keys.verify(token)
        except AuthError as exc:
            return plain_401(str(exc))
        video = claims.video
        if not (video and video.room_join and video.room and claims.identity):
            return plain_401("permissions denied")
        agents = claims.room_config.agents if claims.room_config else ()
        room, _ = self.rooms.create_room(video.room, agents=agents)
        info = models.ParticipantInfo(
            identity=claims.identity,
            name=claims.name,
            metadata=claims.metadata,
            kind=KINDS.get(claims.kind, models.ParticipantInfo.Kind.STANDARD),
            permission=models.ParticipantPermission(
                can_subscribe=video.can_subscribe,
                can_publish=video.can_publish,
                can_publish_data=video.can_publish_data,
                hidden=bool(video.hidden),
                agent=bool(video.agent),
            ),
        )
        info.attributes.update(claims.attributes or {})
        # pinged every ⅔ of the transport timeout, given up ⅓ later (aiohttp's heartbeat)
        ws = web.WebSocketResponse(
            autoping=True, heartbeat=self.rooms.config.transport_timeout_s * 2 / 3
        )
        await ws.prepare(request)
        self.sockets.add(ws)
        link = LabLink(ws, request)
        participant = self.rooms.join(room, info, link)
        self.links[(room.name, info.identity)] = link
        link.outbox.put_nowait(
            json.dumps(
                {
                    "type": "joined",
                    "room": {"name": room.name, "sid": room.proto.sid},
                    "participant": describe(info),
                    "participants": [
                        describe(p.info) for p in room.participants.values() if p is not participant
                    ],
                    "sample_rate": SAMPLE_RATE,
                    "channels": CHANNELS,
                }
            )
        )
        try:
            await self._read(ws, room, participant, link)
        finally:
            self.sockets.discard(ws)
            if self.links.get((room.name, info.identity)) is link:
                del self.links[(room.name, info.identity)]
            self._ended(room, participant, link)
            await asyncio.gather(link.writer, return_exceptions=True)
        return ws

    async def _read(
        self, ws: web.WebSocketResponse, room: Room, p: Participant, link: LabLink
    ) -> None:
        async for frame in ws:
            if frame.type == WSMsgType.BINARY:
                pcm = frame.data
                if len(pcm) % 2 or len(pcm) > MAX_FRAME_BYTES:
                    log.warning("dropping a %d-byte audio frame from %s", len(pcm), p.info.identity)
                    continue
                for other in list(room.participants.values()):
                    if other is not p and isinstance(other.link, Ears):
                        other.link.audio(p.info.identity, pcm)
            elif frame.type == WSMsgType.TEXT and json.loads(frame.data).get("type") == "leave":
                link.goodbye = True
                self.rooms.remove(room, p, Reason.CLIENT_INITIATED)
                return

    def _ended(self, room: Room, p: Participant, link: LabLink) -> None:
        link.outbox.put_nowait(None)
        if link.goodbye or room.participants.get(p.info.identity) is not p:
            return  # a clean leave, or the server already removed it
        delay = self.rooms.config.connection_timeout_s
        log.info("%s lost its connection; leaving in %ss", p.info.identity, delay)
        asyncio.get_running_loop().call_later(
            delay, self.rooms.remove, room, p, Reason.CONNECTION_TIMEOUT
        )

    def cut(self, room: str, identity: str) -> None:
        """Cut `identity`'s connection in `room` without a goodbye; `KeyError` if not connected."""
        self.links[(room, identity)].cut()
