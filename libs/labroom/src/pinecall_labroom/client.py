"""A participant of a lab room: presence and 16-bit PCM audio over one loopback WebSocket.

The lab-room transport replaces WebRTC when the LiveKit stand-in (``pinecall_loadlab``) plays
LiveKit. Wire, as the stand-in serves it at ``<LIVEKIT_URL>/lab/rtc``:

- the socket opens with a real LiveKit access token (``roomJoin``, room, identity, kind);
- the server's first text frame is ``{"type": "joined", "room", "participant", "participants",
  "sample_rate": 48000, "channels": 1}``; later ones are ``participant_joined``,
  ``participant_left`` (with ``reason``, a LiveKit `DisconnectReason` name),
  ``participant_attributes_changed`` (a SIP leg's ``sip.callStatus``…) and ``removed``;
- the client's only text frame is ``{"type": "leave"}`` (a clean goodbye);
- binary frames are 16-bit little-endian PCM, 48 kHz mono, 10–20 ms each; what arrives is prefixed
  with the sender: ``u8 len | identity (utf-8) | pcm``.

Errors: `JoinError` when the server refuses the token (its HTTP status and text).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

import aiohttp

SAMPLE_RATE = 48000
CHANNELS = 1
FRAME_MS = 20
FRAME_SAMPLES = SAMPLE_RATE * FRAME_MS // 1000
"""960 samples: one 20 ms frame at 48 kHz."""


class JoinError(Exception):
    """The server refused the join (bad token, no room grant): `status` and `text`."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(f"lab room join refused: {status} {text}")
        self.status, self.text = status, text


@dataclass(frozen=True)
class AudioChunk:
    """One frame received: who sent it, its PCM bytes (s16le, 48 kHz mono), and when its socket
    received it (wall seconds, ``time.time()``; a recording places the frame by it)."""

    sender: str
    pcm: bytes
    received_at: float | None = None


class AudioQueue(asyncio.Queue[AudioChunk]):
    """The frames received and not read yet; :meth:`waiting` says them without taking them."""

    def waiting(self) -> list[AudioChunk]:
        """The chunks queued, oldest first."""
        # the Queue's own deque (CPython's asyncio/queues.py), which typeshed does not declare
        return list(self._queue)  # type: ignore[attr-defined]


def lab_url(livekit_url: str) -> str:
    """``http(s)://host:port`` or ``ws(s)://…`` → ``ws(s)://host:port/lab/rtc``."""
    u = urlparse(livekit_url)
    scheme = {"http": "ws", "https": "wss"}.get(u.scheme, u.scheme)
    return f"{scheme}://{u.netloc}{u.path.rstrip('/')}/lab/rtc"


class LabRoom:
    """A joined lab room. Create with `LabRoom.connect`; end with `leave` or `abort`."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        ws: aiohttp.ClientWebSocketResponse,
        joined: dict[str, Any],
        own_session: bool,
    ) -> None:
        self._session, self._ws, self._own_session = session, ws, own_session
        self.room: str = joined["room"]["name"]
        self.identity: str = joined["participant"]["identity"]
        self.sample_rate: int = joined["sample_rate"]
        self.participants: dict[str, dict[str, Any]] = {
            p["identity"]: p for p in joined["participants"]
        }
        self.audio = AudioQueue()
        self.presence: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.removed_reason: str | None = None
        self.closed = asyncio.Event()
        self._changed = asyncio.Event()
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def connect(
        cls, url: str, token: str, *, session: aiohttp.ClientSession | None = None
    ) -> LabRoom:
        """Join with `token` at the stand-in whose LiveKit URL is `url`; `JoinError` if refused."""
        own = session is None
        http = session or aiohttp.ClientSession()
        try:
            ws = await http.ws_connect(lab_url(url), headers={"Authorization": f"Bearer {token}"})
        except aiohttp.WSServerHandshakeError as exc:
            if own:
                await http.close()
            raise JoinError(exc.status, exc.message) from None
        except BaseException:
            if own:
                await http.close()
            raise
        joined = json.loads((await ws.receive()).data)
        return cls(http, ws, joined, own)

    async def send(self, pcm: bytes) -> None:
        """Send one frame of s16le mono PCM at `sample_rate` (10–20 ms)."""
        await self._ws.send_bytes(pcm)

    async def wait_for_participant(
        self, *, kind: str | None = None, identity: str | None = None
    ) -> dict[str, Any]:
        """The first other participant matching `kind` (``AGENT``, ``SIP``, ``STANDARD``) and
        `identity`, waiting for one to join if needed."""
        while True:
            for p in self.participants.values():
                if (kind is None or p["kind"] == kind) and identity in (None, p["identity"]):
                    return p
            self._changed.clear()
            await self._changed.wait()

    async def leave(self) -> None:
        """Say goodbye (CLIENT_INITIATED) and wait for the server to close the socket."""
        with contextlib.suppress(ConnectionError, RuntimeError):
            await self._ws.send_str(json.dumps({"type": "leave"}))
        await self.closed.wait()
        await self._cleanup()

    async def abort(self) -> None:
        """Close the socket without the goodbye: to the server, the connection is lost (the
        participant leaves with CONNECTION_TIMEOUT 5 s later)."""
        await self._ws.close()
        await self._cleanup()

    async def _cleanup(self) -> None:
        self._reader.cancel()
        await asyncio.gather(self._reader, return_exceptions=True)
        self.closed.set()
        if self._own_session:
            await self._session.close()

    async def _read(self) -> None:
        try:
            async for msg in self._ws:
                if msg.type == aiohttp.WSMsgType.BINARY:
                    n = msg.data[0]
                    sender = msg.data[1 : 1 + n].decode()
                    chunk = AudioChunk(sender, msg.data[1 + n :], time.time())
                    self.audio.put_nowait(chunk)
                elif msg.type == aiohttp.WSMsgType.TEXT:
                    self._on_text(json.loads(msg.data))
        finally:
            self.closed.set()
            self._changed.set()
            if self._own_session:
                await self._session.close()

    def _on_text(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind in ("participant_joined", "participant_attributes_changed"):
            p = event["participant"]
            self.participants[p["identity"]] = p
        elif kind == "participant_left":
            self.participants.pop(event["participant"]["identity"], None)
        elif kind == "removed":
            self.removed_reason = event["reason"]
        self.presence.put_nowait(event)
        self._changed.set()
