"""``fleet list``'s text as pure functions: the headline, the fleet's state, the marked worker."""

from __future__ import annotations

from typing import Any

from pinecall_contracts.dispatch import FleetOffers
from pinecall_contracts.fleet import FleetTotals, FleetView, WorkerMinute, WorkerRow
from pinecall_roster.listing import fleet_lines


def row(host: str, state: str, **extra: Any) -> WorkerRow:
    fields: dict[str, Any] = {
        "worker": f"pinecall/{host}.1791067258",
        "agent_name": f"pinecall/{host}.1791067258",
        "state": state,
        "seats": 4,
        "active": 4,
        "load": 1.0,
        "first_audio_p95_s": 6.1,
        "last_heard_s": 2.0,
    }
    return WorkerRow(**(fields | extra))


def test_a_full_fleet_with_a_failing_worker_kept_counted_and_its_refusals() -> None:
    minute = WorkerMinute(ended=0, turns=22, first_audio_p95_s=6.1)
    view = FleetView(
        fleet="pinecall",
        environment="production",
        workers=[
            row("worker-a", "full", failing=True, minute=minute),
            row("worker-b", "cordoned", cordoned=True, active=1, load=0.25),
        ],
        totals=FleetTotals(accepting=0, full=1, seats=4, seats_free=0, calls=5),
    )
    offers = FleetOffers(fleet="pinecall", waiting=2, refused={"fleet_full": 3, "quota": 1})
    lines = fleet_lines(view, {"pinecall": offers})
    assert lines[0] == (
        "pinecall (production): 0 accepting, 1 full, 1 cordoned, 0/4 seats free, 5 calls, "
        "4 refused at admission (3 fleet_full, 1 quota), 2 rooms waiting in 10 min"
    )
    assert lines[1] == "  full: no seat free; new callers hear the overflow"
    table = lines[2].splitlines()
    assert table[1].split()[:2] == ["pinecall/worker-a.1791067258", "full*"]
    assert table[2].split()[:2] == ["pinecall/worker-b.1791067258", "cordoned"]
    assert lines[3].startswith("* failing, still offered calls")


def test_a_fleet_of_nobody_heard_is_silent_and_a_fleet_the_dispatcher_does_not_know_waits_0() -> (
    None
):
    view = FleetView(fleet="pinecall-sandbox", environment="sandbox")
    assert fleet_lines(view, {}) == [
        "pinecall-sandbox (sandbox): 0 accepting, 0 full, 0/0 seats free, 0 calls, "
        "0 rooms waiting in 10 min",
        "  silent: no worker heard in 30 s; its callers wait 12 s, then go to the overflow",
    ]
    assert fleet_lines(view, None)[0].endswith(", 0 calls")  # no dispatcher answered


def test_one_of_a_thing_is_said_in_the_singular() -> None:
    view = FleetView(
        fleet="pinecall",
        environment="production",
        workers=[row("worker-a", "full", active=1, load=1.0)],
        totals=FleetTotals(accepting=0, full=1, seats=1, seats_free=0, calls=1),
    )
    offers = FleetOffers(fleet="pinecall", waiting=1)
    assert fleet_lines(view, {"pinecall": offers})[0] == (
        "pinecall (production): 0 accepting, 1 full, 0/1 seat free, 1 call, "
        "1 room waiting in 10 min"
    )


def test_follow_ups_waiting_and_call_backs_not_reached_are_in_the_headline() -> None:
    view = FleetView(
        fleet="pinecall",
        environment="production",
        workers=[row("worker-a", "full", active=1, load=1.0)],
        totals=FleetTotals(accepting=0, full=1, seats=1, seats_free=0, calls=1),
    )
    offers = FleetOffers(fleet="pinecall", waiting=0, followups=2, followups_due=1, tries=3)
    assert fleet_lines(view, {"pinecall": offers})[0] == (
        "pinecall (production): 0 accepting, 1 full, 0/1 seat free, 1 call, "
        "0 rooms waiting in 10 min, 2 follow-ups waiting (1 due now), "
        "0/3 call backs not reached in 10 min"
    )


def test_a_worker_not_heard_lately_is_not_shown_registered_now() -> None:
    """Seen: LIVEKIT "yes" for a worker that had exited 60 s earlier (its last heartbeat said
    registered)."""
    view = FleetView(
        fleet="pinecall",
        environment="production",
        workers=[
            row("gone", "silent", last_heard_s=60.0, active=0, load=0.0),
            row("late", "accepting", last_heard_s=13.0, active=0, load=0.0),
            row("here", "accepting", last_heard_s=2.0, active=0, load=0.0),
        ],
        totals=FleetTotals(accepting=2, full=0, seats=8, seats_free=8, calls=0),
    )
    lines = fleet_lines(view, None)
    table = [line.split() for line in lines[1].splitlines()[1:]]
    assert [(r[0], r[-2], r[-1]) for r in table] == [
        ("pinecall/gone.1791067258", "60s", "-"),
        ("pinecall/late.1791067258", "13s", "-"),
        ("pinecall/here.1791067258", "2s", "yes"),
    ]
    assert lines[2] == (
        "- in LIVEKIT: not heard in 12 s, so whether LiveKit holds it now is not known; "
        "it is offered no call"
    )
