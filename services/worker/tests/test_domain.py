"""The worker's rules: LiveKit's line read from the installed framework, the two loads, the minute."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from livekit.agents import worker as agents_worker

from pinecall_worker import domain


def test_the_line_is_the_installed_frameworks_own() -> None:
    # read straight from the framework's source of truth, so an upgrade that moves it fails here
    assert domain.livekit_line() == agents_worker._default_load_threshold.prod_default


@given(st.integers(1, 256))
def test_livekit_reads_full_exactly_at_the_last_seat(seats: int) -> None:
    line = domain.livekit_line()
    assert domain.livekit_load(seats, seats, line) == pytest.approx(line)
    assert domain.livekit_load(seats - 1, seats, line) < line
    assert domain.roster_load(seats, seats) == 1.0


def test_a_worker_of_8_reporting_calls_over_seats_would_stop_at_6() -> None:
    # the seed's bug: calls ÷ seats crosses 0.7 after the 6th call of 8
    line = domain.livekit_line()
    assert [k for k in range(9) if domain.roster_load(k, 8) < line] == list(range(6))
    assert [k for k in range(9) if domain.livekit_load(k, 8, line) < line] == list(range(8))


def test_seats_and_names() -> None:
    assert domain.default_seats(8) == 32
    assert domain.worker_name("pinecall", "worker-a", 1791067258) == "pinecall/worker-a.1791067258"
    with pytest.raises(ValueError, match="seats"):
        domain.roster_load(1, 0)


def test_the_minute_counts_the_last_sixty_seconds() -> None:
    minute = domain.Minute()
    minute.ended(0.0, failed=True)
    for i in range(4):
        minute.turn(10.0 + i, 1.0 + i)
    assert minute.read(30.0).first_audio_p95_s is None  # four turns: no p95 yet
    minute.turn(20.0, 9.0)
    minute.error(21.0)
    read = minute.read(30.0)
    assert (read.ended, read.failed, read.errors, read.turns) == (1, 1, 1, 5)
    assert read.first_audio_p95_s == 9.0
    later = minute.read(75.0)  # the end at 0 s and the turns at 10–13 s are out of the window
    assert (later.ended, later.turns, later.errors) == (0, 1, 1)


@given(st.lists(st.floats(0, 30, allow_nan=False), min_size=1, max_size=200))
def test_p95_is_a_value_with_95_percent_at_or_below(values: list[float]) -> None:
    p = domain.p95(values)
    assert p in values
    assert sum(v <= p for v in values) >= 0.95 * len(values)
