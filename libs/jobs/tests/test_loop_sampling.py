"""livekit-agents' loop monitor samples a late loop's stack with the collector off, as the fix
proposed for CPython 3.11's ``sys._current_frames`` deadlock does (``pinecall_jobs.loops``)."""

from __future__ import annotations

import gc
import sys
from typing import Any

import pytest
from livekit.agents.telemetry import loop_monitor

from pinecall_jobs import loops

pytestmark = pytest.mark.skipif(
    sys.version_info >= (3, 12), reason="3.12 collects only at the eval breaker: nothing to guard"
)


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """The collector's state each time the monitor's sample runs (a probe in its place, then
    guarded as a process's monitors are)."""
    states: list[bool] = []

    def probe(self: Any, lag: float) -> str:
        states.append(gc.isenabled())
        return "sample"

    monitor: Any = loop_monitor.EventLoopMonitor
    monkeypatch.setattr(monitor, "_sample_loop_thread", probe)
    monkeypatch.setattr(monitor, loops._MARK, False, raising=False)
    loops.make_sampling_safe()
    loops.make_sampling_safe()  # idempotent: wrapped once
    return states


def test_a_sample_runs_with_the_collector_off_and_turns_it_back_on(seen: list[bool]) -> None:
    monitor: Any = loop_monitor.EventLoopMonitor
    assert gc.isenabled()
    assert monitor._sample_loop_thread(None, 0.2) == "sample"
    assert seen == [False]
    assert gc.isenabled()


def test_a_collector_turned_off_by_the_process_stays_off(seen: list[bool]) -> None:
    monitor: Any = loop_monitor.EventLoopMonitor
    gc.disable()
    try:
        monitor._sample_loop_thread(None, 0.2)
        assert not gc.isenabled()  # never turned on where the process had turned it off
    finally:
        gc.enable()
    assert seen == [False]


def test_a_sample_that_raises_still_turns_the_collector_back_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def failing(self: Any, lag: float) -> str:
        raise RuntimeError("a frame gone")

    monitor: Any = loop_monitor.EventLoopMonitor
    monkeypatch.setattr(monitor, "_sample_loop_thread", failing)
    monkeypatch.setattr(monitor, loops._MARK, False, raising=False)
    loops.make_sampling_safe()
    with pytest.raises(RuntimeError):
        monitor._sample_loop_thread(None, 0.2)
    assert gc.isenabled()
