"""Make the callers' WAVs from `lines.LINES` with Debian's espeak-ng (run once; the files are
committed, so a machine without espeak-ng still has them):

    apt-get install -y espeak-ng
    .venv/bin/python -m pinecall_loadlab.callers.make_wavs

Each line becomes ``wav/<name>.wav``: 16-bit mono at `lines.SAMPLE_RATE`, resampled from
espeak-ng's 22 050 Hz with livekit's `rtc.AudioResampler` (the testing extra's).
"""

from __future__ import annotations

import subprocess
import tempfile
import wave
from pathlib import Path

from .lines import LINES, SAMPLE_RATE, VOICE, WORDS_PER_MINUTE

WAV_DIR = Path(__file__).parent / "wav"


def make(name: str, text: str) -> Path:
    """Speak `text` into ``wav/<name>.wav``; `subprocess.CalledProcessError` if espeak-ng fails."""
    from livekit import rtc

    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "espeak.wav"
        subprocess.run(
            ["espeak-ng", "-v", VOICE, "-s", str(WORDS_PER_MINUTE), "-w", str(raw), text],
            check=True,
        )
        with wave.open(str(raw)) as src:
            rate, pcm = src.getframerate(), src.readframes(src.getnframes())
    resampler = rtc.AudioResampler(rate, SAMPLE_RATE, quality=rtc.AudioResamplerQuality.HIGH)
    frames = resampler.push(bytearray(pcm)) + resampler.flush()
    out = WAV_DIR / f"{name}.wav"
    with wave.open(str(out), "wb") as dst:
        dst.setnchannels(1)
        dst.setsampwidth(2)
        dst.setframerate(SAMPLE_RATE)
        dst.writeframes(b"".join(bytes(f.data) for f in frames))
    return out


def main() -> None:
    WAV_DIR.mkdir(exist_ok=True)
    for name, text in LINES.items():
        print(make(name, text))


if __name__ == "__main__":
    main()
