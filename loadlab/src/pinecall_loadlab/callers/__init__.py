"""Callers who speak: a few lines recorded with espeak-ng (``wav/``, see ``wav/README.md``) and
scripts that play them into a lab room in real time, with pauses, interruptions and hang-ups."""

from .lines import LINES
from .script import (
    CallerLog,
    HangUp,
    Interrupt,
    Pause,
    Say,
    Step,
    WaitForAgent,
    WaitForAnswer,
    play,
)
from .speech import frames, line_pcm, silence

__all__ = [
    "LINES",
    "CallerLog",
    "HangUp",
    "Interrupt",
    "Pause",
    "Say",
    "Step",
    "WaitForAgent",
    "WaitForAnswer",
    "frames",
    "line_pcm",
    "play",
    "silence",
]
