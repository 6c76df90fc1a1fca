"""The callers' recorded lines as lab-room audio: 16 kHz WAVs in, 48 kHz 20 ms frames out."""

from __future__ import annotations

import functools
import wave
from pathlib import Path

import numpy as np

from pinecall_labroom import FRAME_SAMPLES, SAMPLE_RATE

from .lines import LINES

WAV_DIR = Path(__file__).parent / "wav"


def wav_path(line: str) -> Path:
    """``wav/<line>.wav``; `KeyError` for a line not in `LINES`."""
    if line not in LINES:
        raise KeyError(line)
    return WAV_DIR / f"{line}.wav"


@functools.cache
def line_pcm(line: str) -> bytes:
    """The line as s16le mono PCM at the lab room's 48 kHz (linear interpolation from the WAV's
    rate: enough for voice activity detection and an energy ear, not for listening)."""
    with wave.open(str(wav_path(line))) as w:
        rate, raw = w.getframerate(), w.readframes(w.getnframes())
    src = np.frombuffer(raw, dtype="<i2").astype(np.float64)
    n = len(src) * SAMPLE_RATE // rate
    out = np.interp(np.arange(n) * (rate / SAMPLE_RATE), np.arange(len(src)), src)
    return out.astype("<i2").tobytes()


def frames(pcm: bytes) -> list[bytes]:
    """Cut PCM into 20 ms frames at 48 kHz, the last padded with silence."""
    size = FRAME_SAMPLES * 2
    pcm += b"\0" * (-len(pcm) % size)
    return [pcm[i : i + size] for i in range(0, len(pcm), size)]


def silence(seconds: float) -> list[bytes]:
    """`seconds` of silent 20 ms frames."""
    return [b"\0" * FRAME_SAMPLES * 2] * round(seconds / 0.02)
