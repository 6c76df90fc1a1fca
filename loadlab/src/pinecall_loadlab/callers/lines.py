"""The simulated callers' lines: the text of each WAV in ``wav/``, one source for the recordings
(`make_wavs`) and for what the speech-to-text fake says a caller said."""

from __future__ import annotations

LINES: dict[str, str] = {
    "greeting": "Hello, this is Sam. I am calling about my order.",
    "question": "Can you tell me when my order will arrive?",
    "yes": "Yes, please.",
    "goodbye": "Thank you, goodbye.",
}
"""Line name → the words spoken in ``wav/<name>.wav``."""

VOICE = "en-us"
WORDS_PER_MINUTE = 160
SAMPLE_RATE = 16000
"""The committed WAVs: 16-bit mono at this rate (espeak-ng speaks at 22 050 Hz; `make_wavs`
resamples)."""
