"""Which socket takes a call, and which version a socket speaks (the socket's pure rules)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pinecall_call_log.sockets.rules import common_version, pick_holder


def test_the_socket_with_the_fewest_calls_takes_the_call_the_earliest_on_a_tie() -> None:
    assert pick_holder([("a", 2), ("b", 1), ("c", 1)]) == "b"
    assert pick_holder([("a", 0), ("b", 0)]) == "a"
    assert pick_holder([]) is None


@given(st.lists(st.integers(min_value=0, max_value=50), min_size=1))
def test_no_socket_holds_fewer_calls_than_the_one_picked(loads: list[int]) -> None:
    picked = pick_holder(list(enumerate(loads)))
    assert picked is not None
    assert loads[picked] == min(loads)
    assert picked == loads.index(min(loads))


def test_the_highest_version_both_speak_or_none() -> None:
    assert common_version((1, 2), [2, 3]) == 2
    assert common_version((1,), [7, 8]) is None
