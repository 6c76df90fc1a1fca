"""The recorder's file is on disk as it is encoded (issue 19, acceptance 2): through the ``av``
that :func:`pinecall_jobs.flushing.flush_each_packet` gives livekit-agents' recorder module, a
file being written holds, before it is closed, every OGG page of the audio encoded so far; and a
recording's length and digest are read off the job's event loop."""

from __future__ import annotations

import threading
from pathlib import Path

import av
import numpy as np
import pytest
from livekit.agents.voice.recorder_io import recorder_io

from pinecall_clients.bucket import BucketAccess
from pinecall_jobs import kept
from pinecall_jobs.flushing import flush_each_packet, flushing
from pinecall_jobs.kept import recording_of, seconds_of

RATE = 48000


def encode(container: av.container.OutputContainer, seconds: float) -> None:
    """``seconds`` of a stereo tone and noise (speech-like bytes) encoded into ``container``."""
    stream = container.streams.audio[0]
    t = np.arange(int(seconds * RATE)) / RATE
    noise = np.random.default_rng(0).standard_normal(len(t)) * 0.05
    left = (0.3 * np.sin(2 * np.pi * 300 * t) + noise).astype(np.float32)
    block = np.stack([left, (noise * 2).astype(np.float32)])
    frame = av.AudioFrame.from_ndarray(block, format="fltp", layout="stereo")
    frame.sample_rate = RATE
    for packet in stream.encode(frame):
        container.mux(packet)


def written_after(opener: object, path: Path, seconds: float) -> bytes:
    """What is on disk of ``path`` after ``seconds`` encoded through ``opener.open``, unclosed."""
    with opener.open(path, mode="w", format="ogg") as container:  # type: ignore[attr-defined]
        container.add_stream("libopus", rate=RATE, layout="stereo")
        encode(container, seconds)
        return path.read_bytes()


def test_the_recorders_file_holds_what_was_encoded_before_it_closes(tmp_path: Path) -> None:
    flush_each_packet()
    flush_each_packet()  # idempotent
    assert flushing()
    shim = getattr(recorder_io, "av")  # noqa: B009
    assert shim is not av
    assert shim.AudioFrame is av.AudioFrame  # the rest is PyAV's own
    data = written_after(shim, tmp_path / "flushed.ogg", 10.0)
    # every page but the one open (one second, page_duration's default) is on disk
    assert 8.5 <= seconds_of(data) <= 10.0


def test_without_it_ffmpeg_holds_the_first_seconds_off_the_disk(tmp_path: Path) -> None:
    """The defect it mends, so a PyAV that stops buffering shows here (and the shim can go)."""
    assert written_after(av, tmp_path / "held.ogg", 10.0) == b""


async def test_a_recordings_length_and_digest_are_read_off_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "whole.ogg"
    with av.open(path, mode="w", format="ogg") as container:
        container.add_stream("libopus", rate=RATE, layout="stereo")
        encode(container, 3.0)
    threads: list[threading.Thread] = []

    def measured(data: bytes) -> float:
        threads.append(threading.current_thread())
        return seconds_of(data)

    monkeypatch.setattr(kept, "seconds_of", measured)
    access = BucketAccess(bucket="recordings")
    said = await recording_of(access, "k.ogg", path.read_bytes(), job="answer", complete=True)
    [thread] = threads
    assert thread is not threading.main_thread()
    assert abs(said.seconds - 3.0) < 0.05
    assert said.url == "s3://recordings/k.ogg"
