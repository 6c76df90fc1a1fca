"""livekit-rtc's native library made safe for a process whose jobs run in threads.

A process that runs jobs in threads (``JobExecutorType.THREAD``: the overflow, the lab's and the
tests' workers) drives livekit-rtc's one native library from several event loops at once. Two
parts of it are not made for that:

- ``FfiClient.instance`` (``livekit/rtc/_ffi_client.py``) is a lazy singleton with no lock: two
  job threads that first touch livekit-rtc at once each build a client and each call
  ``livekit_ffi_initialize``, and each registers its own ``atexit`` dispose.
- The sox resampler (``rtc.AudioResampler``: ``NewSoxResampler``, ``PushSoxResampler``,
  ``FlushSoxResampler``) runs libsoxr on the calling thread (ctypes releases the GIL), and libsoxr
  keeps one FFT table cache per process that ``_soxr_init`` grows with ``realloc`` while another
  resampler may be reading it (``src/fft4g_cache.h``: its reader/writer lock is compiled only with
  OpenMP; the library's strings show the file). livekit-agents makes one per spoken turn when the
  voice's rate is not the output's (``voice/generation.py``, ``_audio_forwarding_task``), and one
  per speech-to-text stream. CI died of a SIGSEGV in ``AudioResampler.__init__`` of an overflow job
  thread while other job threads spoke (stop 24).

:func:`make_thread_safe` builds the client on the calling (main) thread and serializes the
resampler's three native calls behind one process-wide lock: each is microseconds of work on a
20 ms frame, so the lock costs nothing a caller hears. A process whose jobs run one a process
needs it too once it records: the recorder's encode thread (``RecorderIO._Track``) makes and
pushes its own resamplers whenever a frame's rate is not the file's 48 kHz (RoomIO's 24 kHz in
production, both channels), beside the job's loop and its resamplers
(``pinecall_jobs.recording`` calls it before it starts one). Calling it anywhere is harmless.

:func:`dump_on_crash` makes a native crash diagnosable: a job process that dies of SIGSEGV
(exit -11) otherwise leaves nothing but livekit-agents' "process exited with non-zero exit code
-11" in its worker's log. With Python's ``faulthandler`` on, the fatal signal prints every
thread's Python stack to the process's standard error first, which ``up`` and a pod both keep.
"""

from __future__ import annotations

import contextlib
import faulthandler
import functools
import io
import sys
import threading
from collections.abc import Callable
from typing import Any

from livekit import rtc
from livekit.rtc._ffi_client import FfiClient

_SOXR = threading.Lock()
"""Held around every native call of a sox resampler in this process."""

_MARK = "_pinecall_serialized"


def _serialized(call: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(call)
    def locked(*args: Any, **kwargs: Any) -> Any:
        with _SOXR:
            return call(*args, **kwargs)

    return locked


def make_thread_safe() -> None:
    """Make this process's livekit-rtc safe for job threads (see the module docstring).

    Call it on the thread that starts the ``AgentServer``, before any job runs; it is idempotent.
    """
    FfiClient.instance  # noqa: B018  (built here, once, before any job thread races to)
    cls = rtc.AudioResampler
    if getattr(cls, _MARK, False):
        return
    for name in ("__init__", "push", "flush"):
        setattr(cls, name, _serialized(getattr(cls, name)))
    setattr(cls, _MARK, True)


def dump_on_crash() -> None:
    """Make a fatal signal in this process (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT) print every
    thread's Python stack to its standard error before it dies (``faulthandler``). Idempotent:
    once on (here, by ``PYTHONFAULTHANDLER``, or by pytest) it is left as it is. A standard
    error with no file descriptor (a test's captured one) falls back to the process's own, and
    with neither it does nothing: diagnosis never stops a process from starting."""
    if faulthandler.is_enabled():
        return
    for stream in (sys.stderr, sys.__stderr__):
        if stream is None:
            continue
        with contextlib.suppress(AttributeError, ValueError, OSError, io.UnsupportedOperation):
            faulthandler.enable(file=stream, all_threads=True)
            return
