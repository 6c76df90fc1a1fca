"""A process whose jobs run in threads calls livekit-rtc's sox resampler one thread at a time, and
builds the native client once (``pinecall_jobs.native``; CI's SIGSEGV in stop 24)."""

from __future__ import annotations

import threading

import pytest
from livekit import rtc
from livekit.rtc._ffi_client import FfiClient

from pinecall_jobs import native


def test_every_native_call_of_a_resampler_holds_the_process_lock(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    native.make_thread_safe()
    native.make_thread_safe()  # idempotent: wrapped twice, the lock would deadlock the push
    client = FfiClient.instance
    real = client.request
    seen: list[tuple[str, bool]] = []

    def spy(req: object) -> object:
        seen.append((req.WhichOneof("message"), native._SOXR.locked()))  # type: ignore[attr-defined]
        return real(req)  # type: ignore[arg-type]

    monkeypatch.setattr(client, "request", spy)
    resampler = rtc.AudioResampler(24000, 48000, num_channels=1)
    pushed = resampler.push(bytearray(480 * 2 * 4))  # 80 ms at 24 kHz
    flushed = resampler.flush()

    calls = [name for name, _ in seen]
    assert {"new_sox_resampler", "push_sox_resampler", "flush_sox_resampler"} <= set(calls)
    assert [name for name, locked in seen if not locked] == []
    out = sum(f.samples_per_channel for f in pushed + flushed)
    assert 3600 <= out <= 3840  # 80 ms at 48 kHz, less the filter's delay: it still resamples


def test_resamplers_in_many_threads_each_resample_their_own_audio() -> None:
    """Six job-like threads make and push resamplers of different rates at once (as the overflow's
    sentences and the lab workers' turns do); each gets its own audio's length back."""
    native.make_thread_safe()
    rates = [(24000, 48000), (48000, 16000), (22050, 16000), (16000, 48000), (44100, 8000)]
    start = threading.Barrier(6)
    wrong: list[str] = []

    def work(i: int) -> None:
        start.wait()
        for k in range(40):
            source, target = rates[(i + k) % len(rates)]
            resampler = rtc.AudioResampler(source, target, num_channels=1)
            frames = resampler.push(bytearray(source // 5 * 2)) + resampler.flush()  # 200 ms
            got = sum(f.samples_per_channel for f in frames)
            if abs(got - target // 5) > target // 100:  # within 10 ms
                wrong.append(f"{source}->{target}: {got} samples for 200 ms")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)
    assert wrong == []


CRASH = """
import threading, faulthandler
from pinecall_jobs import native

native.dump_on_crash()
native.dump_on_crash()  # idempotent
assert faulthandler.is_enabled()
running = threading.Event()

def encoding() -> None:  # a second thread, parked as the recorder's encode thread waits on its queue
    running.set()
    threading.Event().wait()

threading.Thread(target=encoding, daemon=True, name="encoder").start()
assert running.wait(30)
faulthandler._sigsegv()
"""


def test_a_process_that_segfaults_after_dump_on_crash_prints_every_threads_stack() -> None:
    """A job process that dies of SIGSEGV says where, each thread's stack on its standard error
    (the worker's log), instead of only livekit-agents' 'exit code -11'."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", CRASH], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == -11, (done.returncode, done.stderr)
    assert "Fatal Python error: Segmentation fault" in done.stderr
    assert "in encoding" in done.stderr  # the other thread's stack, not only the crashing one's
    assert "Current thread" in done.stderr
