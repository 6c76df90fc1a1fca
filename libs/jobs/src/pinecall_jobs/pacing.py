"""The caller's side of a recording placed by the audio's own time, not by when the job's loop
read it (issue 19; ``up`` failed 3 of 4 runs under load on the caller's channel).

**Why.** livekit-agents' recorder (``livekit.agents.voice.recorder_io.RecorderIO``, 1.8) stamps
each caller frame with the time the *session read it* (``RecorderAudioInput.__anext__``:
``time.time() - frame.duration``) and starts a new run wherever a stamp is more than 0.1 s off
the run's own clock (``RESYNC_TOLERANCE``). A job whose loop reads its caller seconds late reads
a backlog in a burst: every frame of it is stamped within milliseconds, so each ~6 frames
restart a run at the same instant and the burst is summed onto a fraction of a second of the
timeline (the caller's speech "squeezed", its voiced time lost). Its writer meanwhile moves
past a quiet input after 1 s (``INPUT_STALL_TIMEOUT``), wherever the caller's audio is still
queued; and at the end it writes up to the stop, so frames still queued when the caller left
are never recorded.

**What this does instead.** An input's frames form one continuous stream (a phone, and the
lab's callers, send silence too), so a frame's place is where the previous one ended
(:class:`StreamClock`). Where a run of frames starts is estimated from when they *arrived*: a
frame cannot arrive before it was said, so a run started no later than ``min(arrived_i -
through_i)`` over its frames (``through_i``: the run's audio up to the end of frame ``i``); a
backlog read in a burst is placed back where it belongs, ending about when its newest frame
arrived. The clock holds a run's frames until the input has *caught up* (it holds nothing more
unread), or at most :data:`MAX_HOLD_S` of them, then places them. Only a caught-up run can
show a gap (the stream lost time: a muted track, a sender that skipped); a run placed without
catching up continues the previous one, since its lateness is the backlog's. Nothing is ever
placed over audio already placed, nor before what the writer has written (:meth:`~StreamClock.
close_before`): at worst a run is late, never summed or dropped.

The arrival of a frame is its ``userdata[RECEIVED_AT]`` (wall seconds) when its input stamped
it (``pinecall_labroom.agents.LabAudioInput`` stamps when its socket received it), else the
time the session read it. What an input holds unread (:func:`unread`): the lab's input says
(``unread()``, :class:`UnreadAudio`); livekit-agents' RoomIO input keeps it in its private
channel (``_ParticipantAudioInputStream._data_ch``); any other input cannot say, and its frames
are placed :data:`MAX_HOLD_S` at a time, continuing.

:class:`PacedRecorderIO` is ``RecorderIO`` with that clock on its input, its writer held back
to what the caller's side has reached while the input still holds audio, and at the close the
frames the input still holds placed before the last write (:meth:`PacedRecorderIO.aclose`).

**Two threads, nothing shared.** The recorder encodes in a thread of its own (PyAV, libopus,
and livekit-rtc's resampler when a frame's rate is not the file's). Every caller frame it gets
is a copy made on the job's loop (:func:`_own`), so no frame object is read by the encoder while
the session still holds it (the frames read, and at the close the input's unread ones, which
the session reads after). The close waits for the encode thread to have *ended*, not only for
its last write, at most :data:`CLOSE_WITHIN_S` (:meth:`PacedRecorderIO.encoded`): a job never
goes on to its exit with the encoder inside native code unless that bound passed, and then the
log has the encoder's stack.
It relies on private parts of livekit-agents 1.8's recorder (it overrides ``_write_task`` and
``aclose``, whose body it follows, and uses ``_put``, ``_end_run``, ``_lock``, ``_started``,
``_write_atask``, ``_close_fut``, ``_Captured``, ``_Flush``) and on RoomIO's
``_ParticipantAudioInputStream._data_ch``, so ``libs/jobs/pyproject.toml`` pins
``livekit-agents>=1.8,<1.9``: a new minor version is read again before it is allowed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import threading
import time
import traceback
from typing import Any, Protocol, runtime_checkable

from livekit import rtc
from livekit.agents import utils
from livekit.agents.voice import io as voice_io
from livekit.agents.voice.recorder_io import RecorderIO
from livekit.agents.voice.recorder_io.recorder_io import (
    INPUT_STALL_TIMEOUT,
    WRITE_INTERVAL,
    RecorderAudioInput,
    _Captured,
    _Flush,
)
from livekit.agents.voice.room_io._input import _ParticipantAudioInputStream

_log = logging.getLogger(__name__)

RECEIVED_AT = "received_at"
"""The key of ``rtc.AudioFrame.userdata`` an input puts a frame's arrival under (wall seconds,
``time.time()``); ``pinecall_labroom.agents`` uses the same."""
GAP_S = 0.2
"""Seconds a caught-up run must start past where the stream had reached to be a gap (less is
the jitter of arrival, and the run continues)."""
MAX_HOLD_S = 1.0
"""Seconds of audio the clock holds at most waiting for its input to catch up (a loop that never
catches up still has its caller recorded, this late at most)."""
MAX_OVERRUN_S = 0.5
"""Seconds the last write may go past the close to take the caller's audio placed there."""
CLOSE_WITHIN_S = 10.0
"""Seconds the close waits for the encode thread to write what is left and end (it takes a
fraction of a second: the last 2.5 s of the call, and the caller's backlog); past it the close
raises ``TimeoutError`` and the log has the thread's stack."""


@runtime_checkable
class UnreadAudio(Protocol):
    """An input that can say what it holds that the session has not read yet."""

    def holds_unread(self) -> bool:
        """Whether it holds a frame received and not yet read."""
        ...

    def unread(self) -> list[rtc.AudioFrame]:
        """The frames received and not yet read, oldest first (not taken from the input)."""
        ...


def unread(source: voice_io.AudioInput | None) -> list[rtc.AudioFrame] | None:
    """What ``source`` holds unread, oldest first; None when it cannot say."""
    if isinstance(source, UnreadAudio):
        return source.unread()
    if isinstance(source, _ParticipantAudioInputStream):  # RoomIO's: private, 1.8
        return list(source._data_ch._queue)
    return None


def holds_unread(source: voice_io.AudioInput | None) -> bool | None:
    """Whether ``source`` holds a frame unread (its input has not caught up); None when it
    cannot say."""
    if isinstance(source, UnreadAudio):
        return source.holds_unread()
    if isinstance(source, _ParticipantAudioInputStream):
        return not source._data_ch.empty()
    return None


def _own(frame: rtc.AudioFrame) -> rtc.AudioFrame:
    """A copy of ``frame`` for the encode thread: the session keeps the original."""
    return rtc.AudioFrame(
        frame.data.tobytes(),
        frame.sample_rate,
        frame.num_channels,
        frame.samples_per_channel,
    )


def _arrived(frame: rtc.AudioFrame, read_at: float) -> float:
    received = frame.userdata.get(RECEIVED_AT)
    return float(received) if isinstance(received, int | float) else read_at


class StreamClock:
    """Places the frames of one continuous stream on a recording's timeline (wall seconds):
    :meth:`add` each frame as it is read, which answers the frames it places now, each with
    where it starts."""

    def __init__(self, *, gap_s: float = GAP_S, max_hold_s: float = MAX_HOLD_S) -> None:
        self.gap_s, self.max_hold_s = gap_s, max_hold_s
        self.reached: float | None = None
        """Where the placed audio ends (None before the first frame is placed)."""
        self._floor = float("-inf")
        self._held: list[rtc.AudioFrame] = []
        self._held_s = 0.0
        self._start_by = float("inf")  # the latest the held run can have started

    @property
    def holding(self) -> bool:
        return bool(self._held)

    def add(
        self, frame: rtc.AudioFrame, arrived: float, *, caught_up: bool
    ) -> list[tuple[float, rtc.AudioFrame]]:
        """Take ``frame``, which arrived at ``arrived``; ``caught_up``: its input holds nothing
        more unread. The frames placed now (this one and those held before it), with where
        each starts."""
        self._held.append(frame)
        self._held_s += frame.duration
        self._start_by = min(self._start_by, arrived - self._held_s)
        if caught_up or self._held_s >= self.max_hold_s:
            return self._place(caught_up=caught_up)
        return []

    def flush(self) -> list[tuple[float, rtc.AudioFrame]]:
        """Place what is held (its input is done)."""
        return self._place(caught_up=True) if self._held else []

    def close_before(self, until: float) -> None:
        """The writer wrote the timeline up to ``until``: nothing is placed before it now."""
        self._floor = max(self._floor, until)

    def _place(self, *, caught_up: bool) -> list[tuple[float, rtc.AudioFrame]]:
        start = self._start_by
        if self.reached is not None and (not caught_up or start < self.reached + self.gap_s):
            start = self.reached  # continues (a backlog, or the jitter of arrival)
        start = max(start, self._floor)
        placed = []
        for frame in self._held:
            placed.append((start, frame))
            start += frame.duration
        self.reached = start
        self._held, self._held_s, self._start_by = [], 0.0, float("inf")
        return placed


class PacedRecorderIO(RecorderIO):
    """livekit-agents' recorder with the caller's side placed by its own time (the module's
    docstring); used as ``RecorderIO`` is."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._clock = StreamClock()
        self._source: voice_io.AudioInput | None = None
        self._done_reading = False
        self._encoder: threading.Thread | None = None

    def record_input(self, audio_input: voice_io.AudioInput) -> RecorderAudioInput:
        self._source = audio_input

        def on_frame(read_started: float, frame: rtc.AudioFrame) -> None:
            if self._done_reading:  # the close placed what was left; the session reads on
                return
            arrived = _arrived(frame, read_started + frame.duration)
            self._take(
                self._clock.add(frame, arrived, caught_up=holds_unread(audio_input) is False)
            )

        self._in_record = RecorderAudioInput(
            recording_io=self, source=audio_input, on_frame=on_frame
        )
        return self._in_record

    def _take(self, placed: list[tuple[float, rtc.AudioFrame]]) -> None:
        t0 = self.recording_started_at
        for started_at, frame in placed:
            if t0 is not None and started_at + frame.duration <= t0:
                continue  # said before the recording started (queued since the room was joined)
            self._put(_Captured(channel=0, started_at=started_at, frame=_own(frame)))

    def settled(self, now: float) -> float:
        """How far the caller's side is settled at ``now``: where it reached while its input
        still holds audio (held or unread, which will be placed there), else as long as it
        waits on a quiet input."""
        reached = self._clock.reached
        backlog = self._clock.holding or bool(holds_unread(self._source))
        if backlog:
            start = self.recording_started_at or now
            return reached if reached is not None else start
        quiet = now - INPUT_STALL_TIMEOUT
        return quiet if reached is None else max(reached, quiet)

    def _flush_until(self, until: float) -> None:
        self._clock.close_before(until)
        self._put(_Flush(until=until))

    async def _write_task(self) -> None:
        # RecorderIO._write_task's loop, settled by the clock instead of the last read
        assert self._out_record is not None
        while True:
            await asyncio.sleep(WRITE_INTERVAL)
            settled = self.settled(time.time())
            if pending := self._out_record.pending_since:
                settled = min(settled, pending)  # the agent's segment in flight
            self._flush_until(settled)

    def drain(self) -> None:
        """Place what the input still holds unread and what the clock holds; the session's
        reads after this are not recorded (they are these frames)."""
        if self._done_reading or self._source is None:
            return
        self._done_reading = True
        now = time.time()
        left = unread(self._source) or []
        for i, frame in enumerate(left):
            arrived = _arrived(frame, now)
            self._take(self._clock.add(frame, arrived, caught_up=i == len(left) - 1))
        self._take(self._clock.flush())

    def _encode_thread(self) -> None:
        self._encoder = threading.current_thread()  # before the close can be told it ended
        super()._encode_thread()

    @property
    def encoding_thread_alive(self) -> bool:
        """Whether the encode thread runs (started and not ended)."""
        return self._encoder is not None and self._encoder.is_alive()

    async def encoded(self, within: float = CLOSE_WITHIN_S) -> bool:
        """Wait, at most ``within`` seconds, for the encode thread to end (once the close
        asked it to: its last write done, its file closed). True once it ended or never
        started; False past ``within``, said in the log with the thread's stack. Never cancels
        what it waits for: called again, it waits again."""
        if not self._started and self._encoder is None:
            return True
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._close_fut), timeout=within)
        encoder = self._encoder
        if self._close_fut.done() and encoder is not None and encoder.is_alive():
            # it resolved the close from its last lines: only its return is left
            await asyncio.to_thread(encoder.join, max(0.0, deadline - loop.time()))
        if self._close_fut.done() and not self.encoding_thread_alive:
            return True
        frame = sys._current_frames().get(encoder.ident or -1) if encoder is not None else None
        stack = "".join(traceback.format_stack(frame)) if frame is not None else "(not running)"
        _log.error(
            "the recorder's encode thread did not end within %g s of its close; its stack:\n%s",
            within,
            stack,
        )
        return False

    async def aclose(self, *, at: float | None = None) -> None:
        """Stop: the caller's unread audio placed (:meth:`drain`), the rest written up to
        ``at`` (wall seconds: when the call ended, the close asked; now when None), or up to
        where the caller's audio reaches (at most :data:`MAX_OVERRUN_S` later), and the encode
        thread ended (:meth:`encoded`; ``TimeoutError`` past :data:`CLOSE_WITHIN_S`).
        RecorderIO.aclose, its last write moved, its wait bounded. ``at`` keeps a loaded loop
        that reaches the close seconds late from lengthening the file by as much (``up``
        measured recordings 1.3-2.4 s longer than their calls, past its 1 s, under load)."""
        async with self._lock:
            if not self._started:
                return
            if self._write_atask is not None:
                await utils.aio.cancel_and_wait(self._write_atask)
                self._write_atask = None
            self.drain()
            end = time.time() if at is None else min(at, time.time())
            reached = self._clock.reached
            until = end if reached is None else min(max(end, reached), end + MAX_OVERRUN_S)
            self._end_run(channel=0)
            self._end_run(channel=1)
            self._flush_until(until)
            self._put(None)
            if not await self.encoded(CLOSE_WITHIN_S):
                raise TimeoutError(f"the recorder did not close within {CLOSE_WITHIN_S:g} s")
            self._started = False
