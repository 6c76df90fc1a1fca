"""What the lab checks of a call's recording (issue 19, "In the lab"): it decodes, has its two
channels, lasts as long as the call, and its caller's channel holds the line the caller said.

The check of the caller's lines is on how much speech the caller's channel holds, not on the
waveform (Opus keeps how speech sounds, not its samples; and livekit-agents' recorder places
each frame by its arrival, so a line the session read late from a backlog is squeezed in
time): the channel's 20 ms frames over -40 dBFS, in seconds, against the same of the lines the
caller said (:func:`holds_lines`, at least :data:`HOLDS` of them).
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import av
import numpy as np

from pinecall_loadlab.callers.speech import line_pcm

RATE = 48_000
FRAME = RATE // 50  # 20 ms
HOLDS = 0.5
"""A caller's channel holds its lines when :func:`holds_lines` is at least this."""


@dataclass(frozen=True)
class Decoded:
    """A recording decoded: ``samples`` is (channels, n) float32 at :data:`RATE`."""

    samples: np.ndarray
    channels: int

    @property
    def seconds(self) -> float:
        return float(self.samples.shape[1]) / RATE


def decode(data: bytes) -> Decoded:
    """Decode an OGG/Opus recording's bytes whole (``av.error.FFmpegError`` when it is not)."""
    chunks: list[np.ndarray] = []
    channels = 0
    with av.open(io.BytesIO(data), mode="r", format="ogg") as container:
        stream = container.streams.audio[0]
        channels = stream.channels
        resampler = av.AudioResampler(format="fltp", layout=stream.layout, rate=RATE)
        for frame in container.decode(stream):
            for out in resampler.resample(frame):
                chunks.append(out.to_ndarray())
        for out in resampler.resample(None):
            chunks.append(out.to_ndarray())
    samples = np.concatenate(chunks, axis=1) if chunks else np.zeros((channels, 0), np.float32)
    return Decoded(samples=samples.astype(np.float32), channels=channels)


def _envelope(mono: np.ndarray) -> np.ndarray:
    n = len(mono) // FRAME
    frames = mono[: n * FRAME].reshape(n, FRAME)
    rms = np.sqrt(np.mean(frames.astype(np.float64) ** 2, axis=1)) + 1e-6
    db: np.ndarray = 20 * np.log10(rms)
    return np.maximum(db, -60.0)


def holds_lines(channel: np.ndarray, lines: list[str]) -> float:
    """How much of the speech of ``lines`` (the caller's WAVs) ``channel`` holds: its voiced
    seconds over theirs (about 1.0 when it holds them, 0 for silence)."""
    said = sum(
        voiced_seconds(np.frombuffer(line_pcm(line), dtype=np.int16).astype(np.float32) / 32768)
        for line in lines
    )
    return voiced_seconds(channel) / said if said else 0.0


def voiced_seconds(channel: np.ndarray, *, over_db: float = -40.0) -> float:
    """Seconds of ``channel`` louder than ``over_db`` (dBFS, in 20 ms frames)."""
    return float(np.count_nonzero(_envelope(channel) > over_db)) * FRAME / RATE
