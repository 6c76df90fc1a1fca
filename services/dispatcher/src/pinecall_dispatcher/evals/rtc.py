"""The simulated caller's room on a real LiveKit: WebRTC through ``livekit.rtc`` (the LiveKit
Python SDK, the one livekit-agents' jobs join with), shaped as the caller's :class:`Room
<pinecall_dispatcher.evals.caller.Room>`.

It publishes one microphone track fed from the caller's 20 ms frames (``rtc.AudioSource``), and
subscribes to every remote audio track, read as 48 kHz mono frames (``rtc.AudioStream``) tagged
with the sender's identity. An agent participant is LiveKit's ``PARTICIPANT_KIND_AGENT`` with
its attributes (``lk.agent_name``). The room closes on ``disconnected``.

Not exercised by the tests: the stand-in has no SFU, so under it the caller joins over the lab
transport (``PINECALL_LAB_ROOMS``), as the worker's job does (``shared/DESIGN.md``, "How it is
tested without a LiveKit server"). Errors: :class:`~.runs.NoRoom`-like ``Unavailable``
(``evals_unavailable``, 503) when LiveKit refuses the connection.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import Any

from livekit import rtc

from pinecall_servicekit.errors import Unavailable

SAMPLE_RATE = 48000
KINDS = {
    rtc.ParticipantKind.PARTICIPANT_KIND_AGENT: "AGENT",
    rtc.ParticipantKind.PARTICIPANT_KIND_SIP: "SIP",
}


class NotJoined(Unavailable):
    code = "evals_unavailable"


@dataclass(frozen=True)
class Chunk:
    sender: str
    pcm: bytes


class RtcRoom:
    """A joined WebRTC room (:func:`join`)."""

    def __init__(self, room: rtc.Room) -> None:
        self.room = room
        self.audio: asyncio.Queue[Chunk] = asyncio.Queue()
        self.closed = asyncio.Event()
        self._changed = asyncio.Event()
        self._readers: set[asyncio.Task[None]] = set()
        self.source = rtc.AudioSource(SAMPLE_RATE, 1)
        room.on("participant_connected", lambda _p: self._changed.set())
        room.on("disconnected", lambda _reason: self._close())
        room.on("track_subscribed", self._subscribed)

    async def send(self, pcm: bytes) -> None:
        frame = rtc.AudioFrame(
            data=pcm, sample_rate=SAMPLE_RATE, num_channels=1, samples_per_channel=len(pcm) // 2
        )
        await self.source.capture_frame(frame)

    async def wait_for_participant(
        self, *, kind: str | None = None, identity: str | None = None
    ) -> dict[str, Any]:
        while True:
            for p in self.room.remote_participants.values():
                named = KINDS.get(p.kind, "STANDARD")
                if kind in (None, named) and identity in (None, p.identity):
                    return {"identity": p.identity, "kind": named, "attributes": dict(p.attributes)}
            self._changed.clear()
            await self._changed.wait()

    async def leave(self) -> None:
        await self.room.disconnect()
        self._close()

    def _close(self) -> None:
        self.closed.set()
        self._changed.set()
        for task in self._readers:
            task.cancel()

    def _subscribed(
        self, track: rtc.Track, _pub: rtc.RemoteTrackPublication, who: rtc.RemoteParticipant
    ) -> None:
        if track.kind != rtc.TrackKind.KIND_AUDIO:
            return
        task = asyncio.create_task(self._read(track, who.identity))
        self._readers.add(task)
        task.add_done_callback(self._readers.discard)

    async def _read(self, track: rtc.Track, sender: str) -> None:
        stream = rtc.AudioStream(track, sample_rate=SAMPLE_RATE, num_channels=1)
        try:
            async for event in stream:
                self.audio.put_nowait(Chunk(sender, bytes(event.frame.data)))
        finally:
            with contextlib.suppress(Exception):  # closing a stream of a room that is gone
                await stream.aclose()


async def join(url: str, token: str) -> RtcRoom:
    """Join at ``url`` with ``token`` and publish the caller's microphone; :class:`NotJoined`
    when LiveKit refuses."""
    room = rtc.Room()
    joined = RtcRoom(room)
    try:
        await room.connect(url, token, rtc.RoomOptions(auto_subscribe=True))
        track = rtc.LocalAudioTrack.create_audio_track("caller", joined.source)
        options = rtc.TrackPublishOptions(source=rtc.TrackSource.SOURCE_MICROPHONE)
        await room.local_participant.publish_track(track, options)
    except rtc.ConnectError as exc:
        raise NotJoined(f"the simulated caller could not join: {exc}") from None
    return joined
