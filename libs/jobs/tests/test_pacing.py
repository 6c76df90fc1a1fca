"""The caller's side of a recording is placed by the audio's own time (issue 19;
:mod:`pinecall_jobs.pacing`): a backlog the job's loop read late in a burst lies where it was
said, whole, not summed onto the moment it was read; a gap in the stream stays a gap; what the
caller said and the session never read before the caller left is in the file; the writer does
not pass what the caller's side reached while its input still holds audio.

The recorder runs for real (livekit-agents' encode thread, libopus, the file decoded back and
measured as ``up`` measures it); only the wall clock is the test's (the recorder's and the
pacing's ``time``), so "read 4 s late" takes no time. The caller's input is the lab's own
(:class:`pinecall_labroom.agents.LabAudioInput`, over a room that is only its queue), or one
that stamps nothing, as RoomIO's in production.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from livekit import rtc
from livekit.agents.voice import io as voice_io
from livekit.agents.voice.recorder_io import recorder_io

from pinecall_jobs import pacing
from pinecall_jobs.pacing import RECEIVED_AT, PacedRecorderIO, StreamClock
from pinecall_labroom.agents import RECEIVED_AT as LAB_RECEIVED_AT
from pinecall_labroom.agents import LabAudioInput
from pinecall_labroom.client import FRAME_SAMPLES, SAMPLE_RATE, AudioChunk, AudioQueue
from pinecall_loadlab.vendors.recordings import RATE, decode, voiced_seconds

FRAME_S = FRAME_SAMPLES / SAMPLE_RATE
T0 = 1_000_000.0
"""The wall clock when the recorder starts."""


class Clock:
    """The wall clock the recorder and the pacing read (``time.time``)."""

    def __init__(self) -> None:
        self.now = T0

    def time(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    wall = Clock()
    monkeypatch.setattr(recorder_io, "time", SimpleNamespace(time=wall.time))
    monkeypatch.setattr(pacing, "time", SimpleNamespace(time=wall.time))
    return wall


def pcm(seconds: float, *, voiced: bool) -> list[bytes]:
    """20 ms frames of a tone and noise at about -12 dBFS (speech to the measure), or silence."""
    n = round(seconds / FRAME_S) * FRAME_SAMPLES
    if not voiced:
        return [bytes(2 * FRAME_SAMPLES)] * (n // FRAME_SAMPLES)
    t = np.arange(n) / SAMPLE_RATE
    noise = np.random.default_rng(1).standard_normal(n) * 0.05
    wave = ((0.25 * np.sin(2 * np.pi * 220 * t) + noise) * 32767).astype(np.int16)
    return [wave[i : i + FRAME_SAMPLES].tobytes() for i in range(0, n, FRAME_SAMPLES)]


class _Speaker(voice_io.AudioOutput):
    """The agent's side: says nothing here."""

    def __init__(self) -> None:
        super().__init__(
            label="Speaker", capabilities=voice_io.AudioOutputCapabilities(pause=False)
        )

    async def capture_frame(self, frame: rtc.AudioFrame) -> None:
        await super().capture_frame(frame)

    def flush(self) -> None:
        super().flush()

    def clear_buffer(self) -> None:
        pass


class Caller:
    """The caller's side of a lab room: what its socket received (:meth:`send`) waits in the
    room's queue until the session reads it (:meth:`read`)."""

    def __init__(self, clock: Clock, *, stamped: bool = True) -> None:
        self.clock, self.stamped = clock, stamped
        self.room = SimpleNamespace(audio=AudioQueue(), closed=asyncio.Event())
        self.input = LabAudioInput(self.room, sender="caller")  # type: ignore[arg-type]
        self.sent = 0.0  # seconds of audio since T0, by the caller's own clock

    def send(self, frames: list[bytes], *, at: float | None = None) -> None:
        """``frames`` received, each as it ended on the caller's clock (from ``at`` when given:
        the caller skipped to it)."""
        self.sent = self.sent if at is None else at
        for data in frames:
            self.sent += FRAME_S
            received = T0 + self.sent if self.stamped else None
            self.room.audio.put_nowait(AudioChunk("caller", data, received))

    async def read(self, recorded: Any, frames: int | None = None) -> None:
        """The session reads ``frames`` (all it holds when None) through the recorder, now."""
        count = self.room.audio.qsize() if frames is None else frames
        for _ in range(count):
            await recorded.__anext__()


async def recorder(clock: Clock, caller: Caller, path: Path) -> tuple[PacedRecorderIO, Any]:
    rec = PacedRecorderIO(agent_session=SimpleNamespace())
    recorded = rec.record_input(caller.input)
    rec.record_output(_Speaker())
    await rec.start(output_path=path)
    return rec, recorded


def caller_channel(path: Path) -> np.ndarray:
    decoded = decode(path.read_bytes())
    assert decoded.channels == 2
    left: np.ndarray = decoded.samples[0]
    return left


def onset(channel: np.ndarray) -> float:
    """Seconds into the file where the caller's channel is first voiced."""
    frames = len(channel) // (RATE // 50)
    loud = [
        voiced_seconds(channel[i * RATE // 50 : (i + 1) * RATE // 50]) > 0 for i in range(frames)
    ]
    return loud.index(True) / 50


def test_the_lab_and_the_pacing_agree_on_where_a_frames_arrival_is() -> None:
    assert LAB_RECEIVED_AT == RECEIVED_AT


async def test_a_backlog_read_late_in_a_burst_is_placed_by_its_own_time(
    clock: Clock, tmp_path: Path
) -> None:
    """The stock recorder summed such a burst onto the instant it was read (0.1-0.2 s of the
    2 s line's speech left in the file)."""
    caller = Caller(clock)
    rec, recorded = await recorder(clock, caller, tmp_path / "burst.ogg")
    caller.send(pcm(1.0, voiced=False) + pcm(2.0, voiced=True) + pcm(1.0, voiced=False))
    clock.now = T0 + 4.5  # the job's loop reads it 4.5 s after it began
    await caller.read(recorded)
    clock.now = T0 + 5.0
    await rec.aclose()
    left = caller_channel(tmp_path / "burst.ogg")
    assert voiced_seconds(left) == pytest.approx(2.0, abs=0.1)
    assert onset(left) == pytest.approx(1.0, abs=0.1)


async def test_without_arrivals_a_late_read_continues_the_stream_where_it_was(
    clock: Clock, tmp_path: Path
) -> None:
    """RoomIO's frames say no arrival: a stall's backlog follows what was read before it."""
    caller = Caller(clock, stamped=False)
    rec, recorded = await recorder(clock, caller, tmp_path / "stall.ogg")
    for frame in pcm(1.0, voiced=False):  # read as it comes
        caller.send([frame])
        clock.now = T0 + caller.sent
        await caller.read(recorded)
    caller.send(pcm(2.0, voiced=True) + pcm(0.5, voiced=False))
    clock.now = T0 + 3.5  # a loop that stalled 2.5 s
    await caller.read(recorded)
    clock.now = T0 + 4.0
    await rec.aclose()
    left = caller_channel(tmp_path / "stall.ogg")
    assert voiced_seconds(left) == pytest.approx(2.0, abs=0.1)
    assert onset(left) == pytest.approx(1.0, abs=0.1)


async def test_what_the_session_never_read_before_the_caller_left_is_recorded(
    clock: Clock, tmp_path: Path
) -> None:
    """The stock recorder wrote up to the close and lost what was still queued."""
    caller = Caller(clock)
    rec, recorded = await recorder(clock, caller, tmp_path / "left.ogg")
    caller.send(pcm(0.5, voiced=False))
    clock.now = T0 + 0.5
    await caller.read(recorded)
    caller.send(pcm(1.5, voiced=True))  # the last line, received, never read
    clock.now = T0 + 2.1  # the caller left
    await rec.aclose()
    left = caller_channel(tmp_path / "left.ogg")
    assert voiced_seconds(left) == pytest.approx(1.5, abs=0.1)
    assert onset(left) == pytest.approx(0.5, abs=0.1)
    assert caller.room.audio.qsize() == len(pcm(1.5, voiced=True))  # the session's, not taken


async def test_a_gap_in_the_stream_stays_a_gap(clock: Clock, tmp_path: Path) -> None:
    """The caller's audio stopped coming for 2 s (a sender that skipped, a muted track): what
    came after lies where it came, not against what came before."""
    caller = Caller(clock)
    rec, recorded = await recorder(clock, caller, tmp_path / "gap.ogg")
    for frame in pcm(1.0, voiced=True):
        caller.send([frame])
    clock.now = T0 + caller.sent
    await caller.read(recorded)
    caller.send(pcm(1.0, voiced=True), at=3.0)
    clock.now = T0 + caller.sent
    await caller.read(recorded)
    await rec.aclose()
    left = caller_channel(tmp_path / "gap.ogg")
    assert voiced_seconds(left) == pytest.approx(2.0, abs=0.1)
    assert voiced_seconds(left[RATE : 3 * RATE]) == pytest.approx(0.0, abs=0.05)
    assert onset(left[2 * RATE :]) == pytest.approx(1.0, abs=0.1)


async def test_the_writer_waits_for_the_callers_backlog_and_not_for_a_quiet_caller(
    clock: Clock, tmp_path: Path
) -> None:
    caller = Caller(clock)
    rec, recorded = await recorder(clock, caller, tmp_path / "held.ogg")
    caller.send(pcm(1.0, voiced=False))
    clock.now = T0 + 1.0
    await caller.read(recorded)
    caller.send(pcm(3.0, voiced=True))  # unread
    assert rec.settled(T0 + 4.0) == pytest.approx(T0 + 1.0)  # not past what it reached
    await caller.read(recorded)
    assert rec.settled(T0 + 4.0) == pytest.approx(T0 + 4.0)
    assert rec.settled(T0 + 9.0) == pytest.approx(T0 + 8.0)  # quiet: the stall's second
    clock.now = T0 + 4.0
    await rec.aclose()


def frame() -> rtc.AudioFrame:
    return rtc.AudioFrame(bytes(2 * FRAME_SAMPLES), SAMPLE_RATE, 1, FRAME_SAMPLES)


def test_a_run_is_placed_when_its_input_caught_up_ending_about_when_it_arrived() -> None:
    clock = StreamClock()
    assert clock.add(frame(), 10.0, caught_up=False) == []
    assert clock.holding
    placed = clock.add(frame(), 10.001, caught_up=True)
    assert [round(at, 3) for at, _ in placed] == [9.961, 9.981]
    assert clock.reached == pytest.approx(10.001)


def test_a_run_never_lies_over_what_was_placed_nor_before_what_was_written() -> None:
    clock = StreamClock()
    clock.add(frame(), 10.0, caught_up=True)
    [(at, _)] = clock.add(frame(), 9.9, caught_up=True)  # arrived "early": jitter
    assert at == pytest.approx(10.0)
    clock.close_before(12.0)  # the writer took the silence after it as real
    [(at, _)] = clock.add(frame(), 10.5, caught_up=True)
    assert at == pytest.approx(12.0)


def test_only_a_run_that_caught_up_can_show_a_gap() -> None:
    clock = StreamClock(max_hold_s=2 * FRAME_S)
    clock.add(frame(), 10.0, caught_up=True)
    clock.add(frame(), 15.0, caught_up=False)  # a backlog that never catches up
    [(first, _), _] = clock.add(frame(), 15.0, caught_up=False)
    assert first == pytest.approx(10.0)  # continues: its lateness is the backlog's
    [(at, _)] = clock.add(frame(), 15.0, caught_up=True)
    assert at == pytest.approx(15.0 - FRAME_S)  # caught up 4.9 s past: a gap


def captured(rec: PacedRecorderIO, monkeypatch: pytest.MonkeyPatch) -> list[rtc.AudioFrame]:
    """The caller's frames ``rec`` hands its encode thread, in order (its ``_put`` spied on)."""
    seen: list[rtc.AudioFrame] = []
    put = rec._put

    def spy(item: Any) -> None:
        if isinstance(item, recorder_io._Captured) and item.channel == 0:
            seen.append(item.frame)
        put(item)

    monkeypatch.setattr(rec, "_put", spy)
    return seen


async def test_every_frame_said_is_recorded_once_and_never_as_the_sessions_own_object(
    clock: Clock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing placed twice, nothing dropped: the frames read and those still unread at the close
    reach the encoder once each, in order, as copies (the encode thread never touches a frame the
    session holds); the session's reads after the close add nothing."""
    caller = Caller(clock)
    rec, recorded = await recorder(clock, caller, tmp_path / "own.ogg")
    seen = captured(rec, monkeypatch)
    sent = pcm(1.0, voiced=False) + pcm(1.0, voiced=True)
    caller.send(sent)
    read: list[rtc.AudioFrame] = []
    clock.now = T0 + 1.2
    for _ in range(60):  # 1.2 s read, 0.8 s left unread when the caller leaves
        read.append(await recorded.__anext__())
    clock.now = T0 + 2.1
    await rec.aclose()
    assert [f.data.tobytes() for f in seen] == sent
    assert not {id(f) for f in seen} & {id(f) for f in read}
    for _ in range(len(sent) - len(read)):  # the session reads on: recorded already
        await recorded.__anext__()
    assert len(seen) == len(sent)
    assert not rec.encoding_thread_alive


class _Unstamped(voice_io.AudioInput):
    """RoomIO's input as the pacing sees it: its unread frames are the very objects it will
    yield next (``_ParticipantAudioInputStream._data_ch``)."""

    def __init__(self, frames: list[rtc.AudioFrame]) -> None:
        super().__init__(label="Unstamped")
        self.frames = frames

    async def __anext__(self) -> rtc.AudioFrame:
        if not self.frames:
            raise StopAsyncIteration
        return self.frames.pop(0)

    def holds_unread(self) -> bool:
        return bool(self.frames)

    def unread(self) -> list[rtc.AudioFrame]:
        return list(self.frames)


async def test_the_unread_frames_placed_at_the_close_are_copies_of_what_the_session_reads_next(
    clock: Clock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    frames = [rtc.AudioFrame(data, SAMPLE_RATE, 1, FRAME_SAMPLES) for data in pcm(1.0, voiced=True)]
    source = _Unstamped(list(frames))
    rec = PacedRecorderIO(agent_session=SimpleNamespace())
    recorded = rec.record_input(source)
    rec.record_output(_Speaker())
    await rec.start(output_path=tmp_path / "unread.ogg")
    seen = captured(rec, monkeypatch)
    clock.now = T0 + 0.5
    for _ in range(10):
        await recorded.__anext__()
    clock.now = T0 + 1.0
    await rec.aclose()
    assert [f.data.tobytes() for f in seen] == [f.data.tobytes() for f in frames]
    assert not {id(f) for f in seen} & {id(f) for f in frames}


async def test_the_close_returns_once_the_encode_thread_ended(clock: Clock, tmp_path: Path) -> None:
    caller = Caller(clock)
    rec, recorded = await recorder(clock, caller, tmp_path / "ended.ogg")
    caller.send(pcm(1.0, voiced=True))
    clock.now = T0 + 1.0
    await caller.read(recorded)
    assert rec.encoding_thread_alive
    encoder = rec._encoder
    await rec.aclose()
    assert encoder is not None
    assert not encoder.is_alive()
    assert await rec.encoded(0.0)  # asked again: ended


async def test_an_encoder_that_does_not_end_in_time_fails_the_close_with_its_stack_logged(
    clock: Clock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The close is bounded (CLOSE_WITHIN_S): past it, TimeoutError and the thread's stack in the
    log; asked again once the thread could go on, it says the thread ended."""
    import threading

    release = threading.Event()
    push = recorder_io._Track.push

    def stuck_in_push(self: Any, started_at: float, frame: rtc.AudioFrame) -> None:
        release.wait(10)
        push(self, started_at, frame)

    monkeypatch.setattr(recorder_io._Track, "push", stuck_in_push)
    caller = Caller(clock)
    rec, recorded = await recorder(clock, caller, tmp_path / "stuck.ogg")
    caller.send(pcm(0.2, voiced=True))
    clock.now = T0 + 0.2
    await caller.read(recorded)
    monkeypatch.setattr(pacing, "CLOSE_WITHIN_S", 0.3)
    with pytest.raises(TimeoutError):
        await rec.aclose()
    assert "stuck_in_push" in caplog.text
    assert rec.encoding_thread_alive
    release.set()
    assert await rec.encoded(10.0)
    assert not rec.encoding_thread_alive


async def test_the_file_ends_when_the_close_was_asked_not_when_a_late_loop_ran_it(
    clock: Clock, tmp_path: Path
) -> None:
    """The call ended at 2 s; the loaded loop got to the close at 4 s: the file lasts 2 s."""
    caller = Caller(clock)
    rec, recorded = await recorder(clock, caller, tmp_path / "late.ogg")
    caller.send(pcm(2.0, voiced=True))
    clock.now = T0 + 2.0
    await caller.read(recorded)
    clock.now = T0 + 4.0
    await rec.aclose(at=T0 + 2.0)
    decoded = decode((tmp_path / "late.ogg").read_bytes())
    assert decoded.seconds == pytest.approx(2.0, abs=0.1)
    assert voiced_seconds(decoded.samples[0]) == pytest.approx(2.0, abs=0.1)
