"""livekit-agents audio input and output over a lab room, so an `AgentSession` runs in the lab.

    room = await join_job_room(ctx)             # or LabRoom.connect(url, token)
    wire_session(session, room)                 # before session.start(agent) — no room= given
    await session.start(MyAgent())

- `LabAudioInput` yields the other participants' audio as `rtc.AudioFrame`s (48 kHz mono, 20 ms),
  each with when its socket received it (``userdata["received_at"]``), and says what it holds
  unread (`holds_unread`, `unread`): a recording places the caller's frames by them
  (``pinecall_jobs.pacing``), not by when the session read them;
- `LabAudioOutput` takes what the session speaks (the framework resamples it to 48 kHz, as
  `sample_rate` asks), cuts it into 20 ms frames and sends them in real time, reporting
  playback started/finished as livekit-agents' `io.AudioOutput` contract requires
  (`livekit/agents/voice/io.py:L151-330`); `clear_buffer` interrupts. No pause.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

from livekit import rtc
from livekit.agents import AgentSession, utils
from livekit.agents.voice import io

from .client import CHANNELS, FRAME_SAMPLES, SAMPLE_RATE, AudioChunk, LabRoom

RECEIVED_AT = "received_at"
"""The frame's ``userdata`` key of when it was received (``pinecall_jobs.pacing.RECEIVED_AT``)."""


class LabAudioInput(io.AudioInput):
    """The room's incoming audio; only `sender`'s when given. Ends when the room closes."""

    def __init__(self, room: LabRoom, *, sender: str | None = None) -> None:
        super().__init__(label="LabRoom")
        self._room, self._sender = room, sender

    async def __anext__(self) -> rtc.AudioFrame:
        while True:
            get = asyncio.ensure_future(self._room.audio.get())
            closed = asyncio.ensure_future(self._room.closed.wait())
            done, _ = await asyncio.wait({get, closed}, return_when=asyncio.FIRST_COMPLETED)
            closed.cancel()
            if get not in done:
                get.cancel()
                raise StopAsyncIteration
            chunk = get.result()
            if self._heard(chunk):
                return _frame(chunk)

    def holds_unread(self) -> bool:
        """Whether a frame it would yield was received and not yet read."""
        if self._sender is None:
            return not self._room.audio.empty()
        return any(self._heard(c) for c in self._room.audio.waiting())

    def unread(self) -> list[rtc.AudioFrame]:
        """The frames received that this input would yield and has not yet, oldest first (left
        in the room's queue)."""
        return [_frame(c) for c in self._room.audio.waiting() if self._heard(c)]

    def _heard(self, chunk: AudioChunk) -> bool:
        return self._sender is None or chunk.sender == self._sender


def _frame(chunk: AudioChunk) -> rtc.AudioFrame:
    return rtc.AudioFrame(
        data=chunk.pcm,
        sample_rate=SAMPLE_RATE,
        num_channels=CHANNELS,
        samples_per_channel=len(chunk.pcm) // (2 * CHANNELS),
        userdata={} if chunk.received_at is None else {RECEIVED_AT: chunk.received_at},
    )


_END = object()
"""Marks the end of a flushed segment in the playout queue."""


class LabAudioOutput(io.AudioOutput):
    """Plays the session's speech into the lab room in real time (20 ms frames at 48 kHz)."""

    def __init__(self, room: LabRoom) -> None:
        super().__init__(
            label="LabRoom",
            capabilities=io.AudioOutputCapabilities(pause=False),
            sample_rate=SAMPLE_RATE,
        )
        self._room = room
        self._bstream = utils.audio.AudioByteStream(SAMPLE_RATE, CHANNELS, FRAME_SAMPLES)
        self._queue: asyncio.Queue[rtc.AudioFrame | object] = asyncio.Queue()
        self._played = 0.0
        self._started = False
        self._open = False
        """A segment was captured and has not been reported finished."""
        self._task = asyncio.create_task(self._playout())

    async def capture_frame(self, frame: rtc.AudioFrame) -> None:
        await super().capture_frame(frame)
        self._open = True
        for f in self._bstream.push(frame.data):
            self._queue.put_nowait(f)

    def flush(self) -> None:
        super().flush()
        for f in self._bstream.flush():
            self._queue.put_nowait(f)
        if self._open:
            self._queue.put_nowait(_END)

    def clear_buffer(self) -> None:
        self._bstream.clear()
        while not self._queue.empty():
            self._queue.get_nowait()
        if self._open:
            self._finish(interrupted=True)

    async def aclose(self) -> None:
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)

    def _finish(self, *, interrupted: bool) -> None:
        played, self._played, self._started, self._open = self._played, 0.0, False, False
        self.on_playback_finished(playback_position=played, interrupted=interrupted)

    async def _playout(self) -> None:
        loop = asyncio.get_running_loop()
        clock = loop.time()
        while True:
            item = await self._queue.get()
            if item is _END:
                if self._open:
                    self._finish(interrupted=False)
                continue
            assert isinstance(item, rtc.AudioFrame)
            if not self._started:
                self._started = True
                self.on_playback_started(created_at=time.time())
            clock = max(clock, loop.time())
            with contextlib.suppress(ConnectionError, RuntimeError):
                await self._room.send(bytes(item.data))
            self._played += item.duration
            clock += item.duration
            await asyncio.sleep(max(0.0, clock - loop.time()))  # real-time pacing


def wire_session(session: AgentSession[Any], room: LabRoom, *, sender: str | None = None) -> None:
    """Make `room` the session's audio input and output (call before `session.start`)."""
    session.input.audio = LabAudioInput(room, sender=sender)
    session.output.audio = LabAudioOutput(room)
