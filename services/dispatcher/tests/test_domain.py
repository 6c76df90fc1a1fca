"""Who takes a call: the dispatcher's rules without fixtures (issue 7)."""

from __future__ import annotations

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from pinecall_contracts.fleet import WorkerRow
from pinecall_dispatcher import domain
from pinecall_dispatcher.domain import Offer, Overflow, Room, Wait


def row(
    name: str,
    *,
    seats: int = 8,
    active: int = 0,
    heard: float = 1.0,
    state: str = "accepting",
    registered: bool = True,
) -> WorkerRow:
    worker = f"pinecall/{name}.100"
    return WorkerRow(
        worker=worker,
        agent_name=worker if registered else None,
        state=state,  # type: ignore[arg-type]
        seats=seats,
        active=active,
        load=active / seats,
        first_audio_p95_s=None,
        last_heard_s=heard,
    )


def test_the_worker_with_the_most_seats_free_counting_offers_not_opened() -> None:
    rows = [row("a", active=2), row("b", active=4)]
    d = domain.decide(Room(name="r", arrived_at=0), rows, {"pinecall/a.100": 3}, now=1)
    assert isinstance(d, Offer)
    assert (d.worker, d.seats_free) == ("pinecall/b.100", 4)
    assert (
        d.journal("r") == "room r: offered to pinecall/b.100: 4 seats free, heard 1 s ago (offer 1)"
    )


def test_unheard_unregistered_and_not_accepting_workers_are_not_offered() -> None:
    rows = [
        row("silent", heard=12.0),
        row("booting", registered=False),
        row("cordoned", state="cordoned"),
        row("failing", state="failing"),
        row("draining", state="draining"),
        row("ok", active=7),
    ]
    d = domain.decide(Room(name="r", arrived_at=0), rows, {}, now=1)
    assert isinstance(d, Offer)
    assert d.worker == "pinecall/ok.100"


def test_reoffer_after_12_s_to_another_and_overflow_after_three() -> None:
    rows = [row("a"), row("b"), row("c"), row("d")]
    first = Room(name="r", arrived_at=0, tried=("pinecall/a.100",), offered_at=0.0)
    assert domain.decide(first, rows, {}, now=11.9) == Wait(until=12.0)
    again = domain.decide(first, rows, {}, now=12.0)
    assert isinstance(again, Offer)
    assert again.worker != "pinecall/a.100"
    assert again.attempt == 2
    third = Room(
        name="r",
        arrived_at=0,
        tried=("pinecall/a.100", "pinecall/b.100", "pinecall/c.100"),
        offered_at=24.0,
    )
    assert domain.decide(third, rows, {}, now=36.0) == Overflow(reason="three_offers")


def test_a_room_offered_to_a_worker_livekit_no_longer_holds_is_offered_again_at_once() -> None:
    """Its job will never come (issue 14, items 6 and 7): no 12 s wait, never to that worker, and
    it counts as an offer (the third such goes to the overflow)."""
    rows = [row("a", registered=False), row("b", seats=4)]
    offered = Room(name="r", arrived_at=0, tried=("pinecall/a.100",), offered_at=0.0)
    assert domain.decide(offered, rows, {}, now=1.0) == Wait(until=12.0)
    again = domain.decide(msgspec.structs.replace(offered, unheld=True), rows, {}, now=1.0)
    assert isinstance(again, Offer)
    assert (again.worker, again.attempt) == ("pinecall/b.100", 2)
    third = Room(
        name="r",
        arrived_at=0,
        tried=("pinecall/a.100", "pinecall/b.100", "pinecall/c.100"),
        offered_at=1.0,
        unheld=True,
    )
    assert domain.decide(third, rows, {}, now=2.0) == Overflow(reason="three_offers")
    sentence = Room(
        name="s", arrived_at=0, tried=("pinecall/x.100", "pinecall/a.100"), offered_at=0.0
    )
    sentence = msgspec.structs.replace(sentence, job="sentence", unheld=True)
    assert domain.decide(sentence, rows, {}, now=1.0) == Offer(
        worker="pinecall/b.100", seats_free=4, heard_s=1.0, attempt=3
    )


def test_no_seat_overflows_at_once_and_a_fleet_nobody_heard_waits_12_s() -> None:
    full = [row("a", active=8)]
    assert domain.decide(Room(name="r", arrived_at=0), full, {}, now=0) == Overflow(
        reason="no_seat"
    )
    unheard = [row("a", heard=30)]
    assert domain.decide(Room(name="r", arrived_at=0), unheard, {}, now=5) == Wait(until=12.0)
    assert domain.decide(Room(name="r", arrived_at=0), [], {}, now=12) == Overflow(
        reason="nobody_heard"
    )


@given(
    st.lists(st.tuples(st.integers(1, 8), st.integers(0, 8)), min_size=1, max_size=5),
    st.integers(0, 40),
)
def test_property_a_sweep_never_offers_a_worker_more_calls_than_its_free_seats(
    workers: list[tuple[int, int]], rooms: int
) -> None:
    rows = [row(f"w{i}", seats=s, active=min(a, s)) for i, (s, a) in enumerate(workers)]
    decisions = domain.sweep(
        [Room(name=f"r{i}", arrived_at=i) for i in range(rooms)], rows, {}, now=100
    )
    offered: dict[str, int] = {}
    for _, d in decisions:
        if isinstance(d, Offer):
            offered[d.worker] = offered.get(d.worker, 0) + 1
    for r in rows:
        assert offered.get(r.worker, 0) <= r.seats - r.active
    free = sum(r.seats - r.active for r in rows)
    # every seat is used before any room overflows for want of one
    assert sum(offered.values()) == min(rooms, free)


def test_decide_from_a_saved_fleet_list(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import datetime as dt

    import msgspec
    from click.testing import CliRunner

    from pinecall_contracts.fleet import FleetView, RosterSnapshot
    from pinecall_dispatcher.main import cli

    saved = tmp_path / "fleet.json"
    saved.write_bytes(
        msgspec.json.encode(
            RosterSnapshot(
                fleets=[
                    FleetView(fleet="pinecall", workers=[row("a", active=3), row("b", active=5)])
                ],
                at=dt.datetime.now(dt.UTC),
            )
        )
    )
    result = CliRunner().invoke(cli, ["decide", str(saved)])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("room new-call: offered to pinecall/a.100: 5 seats free")
    bad = tmp_path / "bad.json"
    bad.write_text('{"fleets": 7}')
    result = CliRunner().invoke(cli, ["decide", str(bad)])
    assert result.exit_code == 1
    assert "[bad_request]" in result.output


@given(
    st.integers(1, 32),
    st.integers(0, 32),
    st.integers(0, 32),
    st.integers(0, 64),
)
def test_property_seats_free_are_the_seats_not_promised_whatever_the_heartbeat_counts(
    seats: int, offered: int, held: int, active: int
) -> None:
    """Between a worker taking a job and its next heartbeat the job is in no heartbeat; a fresh
    heartbeat counts it as well as the dispatcher does. Neither counts a seat twice nor misses
    one: the seats free are the seats less what was promised, or less what the heartbeat counts
    when it counts more (calls the dispatcher never saw)."""
    r = row("a", seats=seats, active=min(active, seats))
    pending = domain.not_counted([r], {r.worker: offered}, {r.worker: held})
    assert domain.seats_free(r, pending) == seats - max(offered + held, r.active)


def test_not_counted_ignores_workers_with_nothing_promised_beyond_their_heartbeat() -> None:
    rows = [row("a", active=3), row("b", active=0)]
    assert domain.not_counted(rows, {"pinecall/a.100": 1}, {"pinecall/a.100": 2}) == {}
    assert domain.not_counted(rows, {"pinecall/b.100": 2}, {}) == {"pinecall/b.100": 2}


def test_shortened_rules_keep_the_same_order_of_things() -> None:
    rules = domain.Rules(heard_s=2, reoffer_s=1.5, most_offers=2, fleet_wait_s=1, not_ready_s=5)
    rows = [row("a", heard=1.9), row("b", heard=1.0)]
    room = Room(name="r", arrived_at=0, tried=("pinecall/a.100",), offered_at=0.0)
    assert domain.decide(room, rows, {}, now=1.0, rules=rules) == Wait(until=1.5)
    again = domain.decide(room, rows, {}, now=1.5, rules=rules)
    assert isinstance(again, Offer)
    assert again.worker == "pinecall/b.100"
    twice = Room(name="r", arrived_at=0, tried=("pinecall/a.100", "pinecall/b.100"), offered_at=1)
    assert domain.decide(twice, rows, {}, now=2.5, rules=rules) == Overflow(reason="three_offers")
    unheard = [row("a", heard=2.0)]
    assert domain.decide(Room(name="r", arrived_at=0), unheard, {}, 0.5, rules) == Wait(until=1)
    assert domain.decide(Room(name="r", arrived_at=0), unheard, {}, 1, rules) == Overflow(
        reason="nobody_heard"
    )


def test_admission_is_not_ready_with_nobody_heard_in_90_s_and_full_with_no_seat() -> None:
    assert domain.admission([], {}) == "not_ready"
    assert domain.admission([row("a", heard=90.0)], {}) == "not_ready"
    assert domain.admission([row("a", heard=89.0)], {}) == "unheard"  # heard, not lately
    assert domain.admission([row("a", active=8)], {}) == "fleet_full"
    assert domain.admission([row("a", active=6)], {"pinecall/a.100": 2}) == "fleet_full"
    assert domain.admission([row("a", active=6)], {"pinecall/a.100": 1}) == "admit"
    assert domain.admission([row("a", state="cordoned")], {}) == "cordoned"
    assert domain.admission([row("a", state="draining"), row("b", heard=20.0)], {}) == "cordoned"
    assert domain.admission([row("a", state="cordoned"), row("b", active=8)], {}) == "fleet_full"


def test_the_journal_says_where_a_room_went_and_why() -> None:
    assert (
        Overflow(reason="three_offers").journal("c1", "pinecall/overflow", 3)
        == "room c1: to the overflow pinecall/overflow: offered 3 times and never opened"
    )
    assert not Overflow(reason="no_seat").waited
    assert Overflow(reason="nobody_heard").waited


def test_a_ring_without_a_call_id_gets_one_per_dispatch_and_environment() -> None:
    a = domain.call_id_for("production", "AD_1")
    assert a == domain.call_id_for("production", "AD_1")
    assert a != domain.call_id_for("sandbox", "AD_1")
    assert a != domain.call_id_for("production", "AD_2")
    assert a.startswith("call_")


def test_an_agent_is_lost_unless_it_left_on_purpose_as_livekit_counts_it() -> None:
    for lost in ("CONNECTION_TIMEOUT", "SIGNAL_CLOSE", "JOIN_FAILURE", "MEDIA_FAILURE", None):
        assert domain.agent_lost(lost)
    for on_purpose in (
        "CLIENT_INITIATED",
        "SERVER_SHUTDOWN",
        "DUPLICATE_IDENTITY",
        "MIGRATION",
        "PARTICIPANT_REMOVED",
        "ROOM_DELETED",
        "ROOM_CLOSED",
    ):
        assert not domain.agent_lost(on_purpose)


DEAD = "pinecall/dead.100"


def sentence_room(*tried: str, offered_at: float | None = None) -> Room:
    return Room(name="r", arrived_at=0, tried=(DEAD, *tried), offered_at=offered_at, job="sentence")


def test_a_dead_workers_room_is_offered_at_once_never_to_the_dead_worker() -> None:
    # the dead worker is still heard (its last heartbeat is recent) and has the most seats
    rows = [row("dead", seats=32, heard=3.0), row("a", active=6), row("b", active=2)]
    d = domain.decide(sentence_room(), rows, {}, now=100)
    assert isinstance(d, Offer)
    assert (d.worker, d.attempt) == ("pinecall/b.100", 2)  # the lost worker's was offer 1


def test_a_sentence_is_offered_again_after_12_s_and_to_the_overflow_after_three_offers() -> None:
    rows = [row("a"), row("b"), row("c"), row("d")]
    once = sentence_room("pinecall/a.100", offered_at=100.0)
    assert domain.decide(once, rows, {}, now=111.9) == Wait(until=112.0)
    again = domain.decide(once, rows, {}, now=112.0)
    assert isinstance(again, Offer)
    assert again.worker not in (DEAD, "pinecall/a.100")
    thrice = sentence_room("pinecall/a.100", "pinecall/b.100", "pinecall/c.100", offered_at=124)
    assert domain.decide(thrice, rows, {}, now=136) == Overflow(reason="three_offers")


def test_a_full_fleet_sends_the_sentence_to_the_overflow() -> None:
    rows = [row("dead", heard=2.0), row("a", active=8)]
    assert domain.decide(sentence_room(), rows, {}, now=100) == Overflow(reason="no_seat")


def test_a_fleet_nobody_else_is_heard_from_is_not_full_the_sentence_waits_for_a_worker() -> None:
    """A fleet of one worker, which died: its rooms wait for it to come back (under a new name),
    however long, never to the overflow as a new ring would after 12 s."""
    dead_only = [row("dead", heard=3.0)]
    assert domain.decide(sentence_room(), dead_only, {}, now=100) == Wait(until=100)
    much_later = [row("dead", heard=300.0), row("other", heard=20.0)]
    assert domain.decide(sentence_room(), much_later, {}, now=10_000) == Wait(until=10_000)
    back = [row("dead", heard=30.0), row("dead-again", heard=1.0)]
    d = domain.decide(sentence_room(), back, {}, now=10_000)
    assert isinstance(d, Offer)
    assert d.worker == "pinecall/dead-again.100"


def test_a_sentence_is_due_when_the_caller_is_there_and_the_call_not_over() -> None:
    due = domain.sentence_due
    assert due("answer", "open", None, caller_here=True)
    assert not due("answer", "open", None, caller_here=False)
    # a log that does not answer cannot say the call is over: the caller hears the sentence
    assert due("answer", None, None, caller_here=True)
    # a job's process dead: its worker ended the call failed and left it unsealed for this
    assert due("answer", "ended", "failed", caller_here=True)
    assert due("answer", "ended", "drained", caller_here=True)  # past the worker's drain
    assert not due("answer", "ended", "completed", caller_here=True)  # ended on purpose
    assert not due("answer", "ended", "caller_hangup", caller_here=True)
    assert not due("answer", "sealed", "failed", caller_here=True)
    assert not due("answer", "unknown", None, caller_here=True)
    # a sentence whose own job was lost: its call ended drained at the first loss
    assert due("sentence", "ended", "drained", caller_here=True)
    assert not due("sentence", "sealed", "drained", caller_here=True)


def test_a_phone_caller_is_called_back_a_web_visitor_is_not() -> None:
    assert domain.calls_back("sip", "+15550100")
    assert not domain.calls_back("sip", None)
    assert not domain.calls_back("web", "+15550100")
