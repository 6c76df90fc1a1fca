"""livekit-agents' recorder made to put its file on disk as it encodes (issue 19, acceptance 2).

``RecorderIO`` (``livekit/agents/voice/recorder_io/recorder_io.py``) encodes the call in its
own thread and writes it with ``av.open(path, mode="w", format="ogg")``: FFmpeg's file
protocol, whose I/O buffer (256 KiB in the FFmpeg PyAV 18 ships) is written only when full.
At the recorder's ~90 kb/s that is ~25 s of a call held in memory: a job SIGKILLed before it
had nothing on disk, so nothing in its upload, and the reaper had nothing to keep (measured
with 40 s of stereo libopus: the file stayed 0 bytes through 20 s of audio without this, and
grew by each ~1 s OGG page with it; ``libs/jobs/tests/test_flushing.py``).

FFmpeg's muxer option ``flush_packets=1`` (``libavformat/options_table.h``: "enable flushing
of the I/O context after each packet") writes through after every packet; the OGG muxer
still emits whole pages (``page_duration``: one second), so what is on disk is the pages
made so far. The recorder takes no options, so :func:`flush_each_packet` gives its module an
``av`` whose ``open`` adds that one option; everything else is PyAV's own. Only that module
sees it; a process calls it once (idempotent) before its jobs record.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import av
from livekit.agents.voice.recorder_io import recorder_io

FLUSH = {"flush_packets": "1"}
"""The container option the recorder's file is opened with."""


class _FlushingAv:
    """PyAV as the recorder's module sees it: :meth:`open` adds :data:`FLUSH`."""

    def __init__(self, module: ModuleType) -> None:
        self._av = module

    def __getattr__(self, name: str) -> Any:
        return getattr(self._av, name)

    def open(self, *args: Any, **kwargs: Any) -> Any:
        """``av.open`` with ``container_options`` plus :data:`FLUSH` (the caller's win)."""
        options = FLUSH | dict(kwargs.pop("container_options", None) or {})
        return self._av.open(*args, container_options=options, **kwargs)


def flush_each_packet() -> None:
    """Make every ``RecorderIO`` of this process write its file through after each packet."""
    if not flushing():
        setattr(recorder_io, "av", _FlushingAv(av))  # noqa: B010  (the module's own name)


def flushing() -> bool:
    """Whether :func:`flush_each_packet` was called in this process."""
    return isinstance(getattr(recorder_io, "av", None), _FlushingAv)
