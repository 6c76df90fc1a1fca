"""The roster's rules, without fixtures (seed 000: "The gateway hears every worker", "A worker that
is up but bad", "The burst")."""

from __future__ import annotations

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from pinecall_contracts.fleet import CordonSetting, WorkerHeartbeat, WorkerMinute
from pinecall_roster import domain
from pinecall_roster.roster import Roster

NOW = 1_800_000_000.0


def hb(
    host: str = "w1",
    *,
    start: int = 100,
    active: int = 0,
    seats: int = 8,
    minute: WorkerMinute | None = None,
    draining: bool = False,
    fleet: str = "pinecall",
    load: float | None = None,
) -> WorkerHeartbeat:
    return WorkerHeartbeat(
        fleet=fleet,
        worker=f"{fleet}/{host}.{start}",
        active=active,
        max_jobs=seats,
        load=active / seats if load is None else load,
        draining=draining,
        minute=minute,
    )


def heard(heartbeat: WorkerHeartbeat, ago: float = 1.0) -> domain.Heard:
    return domain.Heard(heartbeat=heartbeat, heard_at=NOW - ago)


BAD_ERRORS = WorkerMinute(ended=4, failed=2)
SLOW = WorkerMinute(turns=20, first_audio_p95_s=5.01)


def states(*workers: tuple[domain.Heard, bool]) -> list[str]:
    return [p.state for p in domain.standings(list(workers), NOW)]


# heard, silent, forgotten
def test_a_worker_is_silent_from_30_s_and_forgotten_from_an_hour() -> None:
    assert not domain.is_silent(NOW - 29.9, NOW)
    assert domain.is_silent(NOW - 30, NOW)
    assert not domain.is_forgotten(NOW - 3599, NOW)
    assert domain.is_forgotten(NOW - 3600, NOW)
    assert states((heard(hb(), ago=31), False)) == ["silent"]


def test_a_forgotten_worker_leaves_the_roster() -> None:
    roster = Roster()
    roster.hear(hb("old"), NOW - 3600)
    roster.hear(hb("new"), NOW - 10)
    assert roster.forget_silent(NOW) == 1
    assert [
        p.heard.heartbeat.worker for p in roster.standing("pinecall", NOW, lambda _: False)
    ] == ["pinecall/new.100"]


# full
def test_full_at_the_last_seat_or_a_load_of_one() -> None:
    assert not domain.is_full(hb(active=7, seats=8))
    assert domain.is_full(hb(active=8, seats=8))
    assert domain.is_full(hb(active=3, seats=8, load=1.0))
    assert domain.is_full(hb(active=0, seats=0, load=0.0))


def test_totals_count_seats_of_accepting_and_full_workers_and_calls_of_every_worker_heard() -> None:
    standing = domain.standings(
        [
            (heard(hb("a", active=2)), False),
            (heard(hb("b", active=8)), False),
            (heard(hb("c", active=1)), True),  # cordoned: calls count, seats do not
            (heard(hb("d", active=5), ago=40), False),  # silent: nothing counts
        ],
        NOW,
    )
    t = domain.totals(standing)
    assert (t.accepting, t.full, t.seats, t.seats_free, t.calls) == (1, 1, 16, 6, 11)
    assert not domain.fleet_is_full(t)
    assert domain.fleet_is_full(domain.totals(standing[1:]))


# failing, with the minimum counts
def test_failing_needs_four_ended_calls_or_twenty_turns() -> None:
    assert not domain.is_failing(None)
    assert not domain.is_failing(WorkerMinute(ended=3, failed=3))
    assert domain.is_failing(WorkerMinute(ended=4, failed=2))
    assert not domain.is_failing(WorkerMinute(ended=5, failed=2))
    assert not domain.is_failing(WorkerMinute(turns=19, first_audio_p95_s=9.0))
    assert not domain.is_failing(WorkerMinute(turns=20, first_audio_p95_s=5.0))
    assert domain.is_failing(SLOW)


def test_a_failing_worker_stops_counting_while_another_accepts() -> None:
    assert states((heard(hb("a", minute=BAD_ERRORS)), False), (heard(hb("b")), False)) == [
        "failing",
        "accepting",
    ]


def test_failing_never_empties_a_fleet() -> None:
    # alone: still counted
    assert states((heard(hb("a", minute=SLOW)), False)) == ["accepting"]
    # every worker failing: every one counted
    assert states(
        (heard(hb("a", minute=SLOW)), False), (heard(hb("b", minute=BAD_ERRORS)), False)
    ) == ["accepting", "accepting"]
    # the other one is full, cordoned or silent: it does not accept, so the failing one counts
    assert states((heard(hb("a", minute=SLOW)), False), (heard(hb("b", active=8)), False)) == [
        "accepting",
        "full",
    ]
    assert states((heard(hb("a", minute=SLOW)), False), (heard(hb("b")), True)) == [
        "accepting",
        "cordoned",
    ]


workers_strategy = st.lists(
    st.tuples(
        st.integers(0, 10),  # active
        st.integers(1, 10),  # seats
        st.booleans(),  # failing
        st.booleans(),  # cordoned
        st.floats(0, 60),  # heard ago
        st.booleans(),  # draining
    ),
    min_size=1,
    max_size=8,
)


@given(workers_strategy)
def test_property_failing_never_leaves_a_fleet_without_a_seat_it_had(workers: list) -> None:
    pairs = [
        (
            heard(
                hb(
                    f"w{i}", active=min(a, s), seats=s, minute=SLOW if bad else None, draining=drain
                ),
                ago=ago,
            ),
            cordoned,
        )
        for i, (a, s, bad, cordoned, ago, drain) in enumerate(workers)
    ]
    standing = domain.standings(pairs, NOW)
    without_failing = [
        p
        for p in standing
        if p.state == "accepting"
        or (p.state == "failing" and not domain.is_full(p.heard.heartbeat))
    ]
    # if any worker would accept without failing, some worker still accepts with it
    if without_failing:
        assert any(p.state == "accepting" for p in standing)
    # a failing worker is only ever set aside for a healthy accepting one
    if any(p.state == "failing" for p in standing):
        assert any(p.state == "accepting" and not p.failing for p in standing)


# the newest start replaces; the dead registration is never counted
def test_a_worker_back_under_its_name_with_a_newer_start_replaces_the_old() -> None:
    roster = Roster()
    assert roster.hear(hb("w1", start=100, active=3), NOW - 2)
    assert roster.hear(hb("w1", start=200, active=0), NOW - 1)
    assert not roster.hear(hb("w1", start=100, active=3), NOW)  # a late beat of the dead one
    standing = roster.standing("pinecall", NOW, lambda _: False)
    assert [p.heard.heartbeat.worker for p in standing] == ["pinecall/w1.200"]


# LiveKit's registration
def test_a_row_says_how_long_livekit_has_not_held_the_worker_as_of_now() -> None:
    roster = Roster()
    lost = msgspec.structs.replace(hb("w1"), unregistered_s=4.0)
    roster.hear(lost, NOW - 2.5)
    roster.hear(msgspec.structs.replace(hb("w2"), agent_name="pinecall/w2.100"), NOW - 2.5)
    rows = roster.view("pinecall", NOW, lambda _: False).workers
    assert [(r.agent_name, r.unregistered_s) for r in rows] == [
        (None, 6.5),
        ("pinecall/w2.100", None),
    ]


# wanted
def fleet_standings(*workers: WorkerHeartbeat, ago: float = 1.0) -> list[domain.Standing]:
    return domain.standings([(heard(w, ago), False) for w in workers], NOW)


def test_wanted_fits_the_scaled_calls_at_sixty_percent() -> None:
    fleet = fleet_standings(
        hb("core-1", active=1, seats=2),
        hb("scaled-a", active=20, seats=32),
        hb("scaled-b", active=5, seats=32),
    )
    assert domain.wanted_workers(fleet, prefix="scaled", seats=32, most=None) == (2, 25, 64)
    assert domain.wanted_workers(fleet, prefix="scaled", seats=32, most=1)[0] == 1
    quiet = fleet_standings(hb("core-1", seats=2), hb("scaled-a", seats=32))
    assert domain.wanted_workers(quiet, prefix="scaled", seats=32, most=None)[0] == 0


def test_wanted_never_asks_twice_for_a_booting_pod() -> None:
    full_core = fleet_standings(hb("core-1", active=2, seats=2), hb("core-2", active=2, seats=2))
    first = domain.wanted_workers(full_core, prefix="scaled", seats=32, most=35)[0]
    assert first == 1
    # the pod KEDA made boots and is not heard yet: the same answer, again and again
    for _ in range(3):
        assert domain.wanted_workers(full_core, prefix="scaled", seats=32, most=35)[0] == first
    # heard with its seats free: the fleet is not full, one is still enough
    booted = fleet_standings(
        hb("core-1", active=2, seats=2),
        hb("core-2", active=2, seats=2),
        hb("scaled-x", active=0, seats=32),
    )
    assert domain.wanted_workers(booted, prefix="scaled", seats=32, most=35)[0] == 1


def test_wanted_matches_the_prefix_on_the_host_or_the_whole_name() -> None:
    assert domain.is_scaled("pinecall/worker-scaled-production-5f6.1", "worker-scaled-production")
    assert domain.is_scaled("pinecall/worker-scaled-production-5f6.1", "pinecall/worker-scaled")
    assert not domain.is_scaled("pinecall/worker-core-0.1", "worker-scaled")


@given(
    st.lists(st.tuples(st.integers(0, 40), st.booleans()), max_size=10),
    st.integers(1, 64),
    st.integers(0, 50),
)
def test_property_wanted_never_exceeds_most_and_holds_the_calls(
    scaled: list[tuple[int, bool]], seats: int, most: int
) -> None:
    fleet = fleet_standings(
        *(hb(f"scaled-{i}", active=min(a, seats), seats=seats) for i, (a, _) in enumerate(scaled))
    )
    wanted, calls, _ = domain.wanted_workers(fleet, prefix="scaled", seats=seats, most=most)
    assert wanted <= most
    if wanted < most:
        assert wanted * seats * domain.WANTED_TARGET >= calls


# newest cordon wins, by the server's revision
def test_the_newest_cordon_wins_by_revision_never_by_clock() -> None:
    import datetime as dt

    early = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    late = dt.datetime(2027, 1, 1, tzinfo=dt.UTC)
    set_ = CordonSetting(worker="pinecall/w1", cordoned=True, at=late)
    lifted = CordonSetting(worker="pinecall/w1", cordoned=False, at=early)
    assert domain.newest_cordon([(7, set_), (9, lifted)]) is lifted
    assert domain.newest_cordon([(9, lifted), (7, set_)]) is lifted
    assert domain.newest_cordon([]) is None


@given(
    st.lists(st.tuples(st.integers(1, 10_000), st.booleans()), min_size=1, unique_by=lambda t: t[0])
)
def test_property_newest_cordon_is_order_free(settings: list[tuple[int, bool]]) -> None:
    import datetime as dt

    items = [
        (rev, CordonSetting(worker="pinecall/w", cordoned=c, at=dt.datetime.now(dt.UTC)))
        for rev, c in settings
    ]
    best = domain.newest_cordon(items)
    assert best is not None
    assert best == max(items, key=lambda i: i[0])[1]
    assert domain.newest_cordon(list(reversed(items))) == best


def test_heard_is_plain_data() -> None:
    assert msgspec.structs.asdict(heard(hb()))["heard_at"] == NOW - 1.0
