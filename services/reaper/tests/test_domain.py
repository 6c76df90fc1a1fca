"""The reaper's rules on their own: plain values and an explicit now (seed 002, "A call nobody is
running"; seed 003, MAX_CALL_SECONDS), with hypothesis where a property holds."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pinecall_reaper.domain import (
    WRITTEN_QUIET_S,
    CallSeen,
    RoomSeen,
    Rules,
    Verdict,
    judge,
    unclaimed,
    worth_a_look,
    written_verdict,
)

T0 = dt.datetime(2026, 11, 30, 6, 0, tzinfo=dt.UTC)
RULES = Rules()


def at(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


def call(*, ended: bool = False, opened: float = 0.0, moved: float = 0.0) -> CallSeen:
    return CallSeen(
        call="call_1", room="room-1", ended=ended, opened_at=at(opened), last_entry_at=at(moved)
    )


ROOM = RoomSeen(name="room-1", created_at=T0, participants=1)


def test_the_seeds_numbers() -> None:
    assert (RULES.quiet_s, RULES.max_call_seconds) == (300.0, 1800.0)
    assert WRITTEN_QUIET_S == {"chat": 300.0, "whatsapp": 7200.0}


def test_quiet_five_minutes_with_no_agent_ends_drained_and_takes_the_room() -> None:
    assert judge(call(), ROOM, 0, at(299.9), RULES) is None
    assert judge(call(), ROOM, 0, at(300), RULES) == Verdict(
        call="call_1",
        room="room-1",
        why="no_agent",
        outcome="drained",
        take_room=True,
        cause="stale",
    )


def test_a_room_gone_counts_as_no_agent_left() -> None:
    assert judge(call(), None, 0, at(300), RULES) == Verdict(
        call="call_1",
        room="room-1",
        why="room_gone",
        outcome="drained",
        take_room=False,
        cause="stale",
    )


def test_an_agent_in_the_room_keeps_a_quiet_call_until_the_ceiling() -> None:
    assert judge(call(), ROOM, 1, at(1799), RULES) is None
    assert judge(call(moved=1790), ROOM, 1, at(1800), RULES) == Verdict(
        call="call_1", room="room-1", why="ceiling", outcome="timeout", take_room=True
    )


def test_an_ended_call_is_only_sealed_its_outcome_kept() -> None:
    verdict = judge(call(ended=True), ROOM, 0, at(300), RULES)
    assert verdict is not None
    assert (verdict.outcome, verdict.cause) == (None, None)


def test_a_call_just_written_to_is_not_worth_a_look() -> None:
    assert not worth_a_look(call(moved=100), at(399), RULES)
    assert worth_a_look(call(moved=100), at(400), RULES)
    assert worth_a_look(call(moved=1799), at(1800), RULES)  # the ceiling


def test_an_unclaimed_room_goes_only_once_older_than_quiet() -> None:
    rooms = [
        RoomSeen(name="young", created_at=at(100), participants=0),
        RoomSeen(name="old", created_at=at(0), participants=0),
        RoomSeen(name="held", created_at=at(0), participants=2),
    ]
    assert [r.name for r in unclaimed(rooms, {"held"}, at(300), RULES)] == ["old"]


def test_written_calls_time_out_as_long_as_their_endpoint_waits() -> None:
    assert written_verdict("chat", T0, at(299)) is None
    assert written_verdict("chat", T0, at(300)) == "timeout"
    assert written_verdict("whatsapp", T0, at(7199)) is None
    assert written_verdict("whatsapp", T0, at(7200)) == "timeout"
    with pytest.raises(KeyError):
        written_verdict("fax", T0, at(9999))  # type: ignore[arg-type]


def test_a_shorter_chat_quiet_is_the_settings_and_leaves_whatsapp_at_the_seeds() -> None:
    """``up`` runs the reaper with ``PINECALL_CHAT_QUIET_S`` short, so its chats end within it."""
    short = Rules(chat_quiet_s=10)
    assert written_verdict("chat", T0, at(9.9), short) is None
    assert written_verdict("chat", T0, at(10), short) == "timeout"
    assert written_verdict("whatsapp", T0, at(7199), short) is None


seconds = st.floats(min_value=0, max_value=10_000, allow_nan=False)
calls = st.builds(call, ended=st.booleans(), opened=seconds, moved=seconds)
rooms = st.one_of(st.none(), st.just(ROOM))
agents = st.integers(min_value=0, max_value=3)


@given(calls, rooms, agents, seconds, seconds)
def test_a_verdict_once_given_stands_later(
    c: CallSeen, room: RoomSeen | None, n: int, now: float, later: float
) -> None:
    """Time only adds verdicts: a call reaped at ``now`` is reaped at every later time, and
    only the ceiling (``timeout``) can take the place of ``drained``."""
    first = judge(c, room, n, at(now), RULES)
    then = judge(c, room, n, at(now + later), RULES)
    if first is not None:
        assert then is not None
        assert then.why == first.why or then.why == "ceiling"


@given(calls, rooms, agents, seconds)
def test_never_an_agents_call_under_the_ceiling_nor_a_call_not_quiet(
    c: CallSeen, room: RoomSeen | None, n: int, now: float
) -> None:
    verdict = judge(c, room, n, at(now), RULES)
    under = (at(now) - c.opened_at).total_seconds() < RULES.max_call_seconds
    if under and (room is not None and n > 0):
        assert verdict is None
    if under and (at(now) - c.last_entry_at).total_seconds() < RULES.quiet_s:
        assert verdict is None
    if verdict is not None:
        assert verdict.take_room == (room is not None)
        assert (verdict.outcome is None) == c.ended
        assert verdict.outcome in (None, "timeout" if verdict.why == "ceiling" else "drained")
        assert worth_a_look(c, at(now), RULES)


@given(
    st.lists(
        st.builds(
            RoomSeen,
            name=st.sampled_from("abcdef"),
            created_at=st.builds(at, seconds),
            participants=agents,
        )
    ),
    st.sets(st.sampled_from("abcdef")),
    seconds,
)
def test_a_room_a_call_holds_or_younger_than_quiet_is_never_unclaimed(
    listed: list[RoomSeen], claimed: set[str], now: float
) -> None:
    for room in unclaimed(listed, claimed, at(now), RULES):
        assert room.name not in claimed
        assert (at(now) - room.created_at).total_seconds() >= RULES.quiet_s


@given(st.sampled_from(["chat", "whatsapp"]), seconds, seconds)
def test_a_written_call_timed_out_stays_timed_out(channel: str, quiet: float, more: float) -> None:
    if written_verdict(channel, T0, at(quiet)) == "timeout":  # type: ignore[arg-type]
        assert written_verdict(channel, T0, at(quiet + more)) == "timeout"  # type: ignore[arg-type]
