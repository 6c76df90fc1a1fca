"""The loop watcher tells a loop its own code held from one that waited (issue 20)."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from pinecall_servicekit import loopwatch


def _spin(cpu_s: float) -> None:
    """Hold the loop's thread for ``cpu_s`` seconds of its own CPU (a callback that computes)."""
    until = time.thread_time() + cpu_s
    while time.thread_time() < until:
        pass


async def _first_late(hold: float, how: str) -> tuple[str, float]:
    late: asyncio.Future[tuple[str, float]] = asyncio.get_running_loop().create_future()

    def heard(kind: str, late_ms: float) -> None:
        if not late.done():
            late.set_result((kind, late_ms))

    async with loopwatch.watching("test", threshold_ms=50, every_s=0.01, on_late=heard):
        await asyncio.sleep(0)  # the watcher's first wake is scheduled
        if how == "spin":
            _spin(hold)
        else:
            time.sleep(hold)  # noqa: ASYNC251  (the point: a blocking call on the loop)
        async with asyncio.timeout(30):
            return await late


async def test_a_callback_computing_on_the_loop_is_blocked(
    caplog: pytest.LogCaptureFixture,
) -> None:
    before = loopwatch.LATE["blocked"]
    with caplog.at_level(logging.WARNING, logger="pinecall.loop"):
        kind, late_ms = await _first_late(0.2, "spin")
    assert kind == "blocked"
    assert late_ms >= 190
    assert loopwatch.LATE["blocked"] == before + 1
    (line,) = [r.getMessage() for r in caplog.records if loopwatch.MARK in r.getMessage()]
    assert line.startswith(f"{loopwatch.MARK} ")
    assert "(blocked: " in line
    assert line.endswith(" in test")


async def test_a_loop_off_the_cpu_is_stalled_not_blocked(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="pinecall.loop"):
        kind, late_ms = await _first_late(0.2, "sleep")
    assert kind == "stalled"
    assert late_ms >= 190
    said = [r.levelno for r in caplog.records if loopwatch.MARK in r.getMessage()]
    assert said  # the first; a busy machine may stall a later wake too
    assert set(said) == {logging.INFO}  # the machine's, not the code's: no warning


async def test_an_app_in_a_tests_loop_watches_nothing() -> None:
    """An in-process replica shares the test's loop: its watcher would time the test."""
    token = loopwatch.SHARED.set(True)
    try:
        async with loopwatch.watching("replica", threshold_ms=50, every_s=0.01):
            tasks = {t.get_name() for t in asyncio.all_tasks()}
    finally:
        loopwatch.SHARED.reset(token)
    assert "loopwatch replica" not in tasks
    async with loopwatch.watching("own", threshold_ms=50, every_s=0.01):
        assert "loopwatch own" in {t.get_name() for t in asyncio.all_tasks()}
