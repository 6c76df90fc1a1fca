"""doctor's rules as pure functions: each finds its problem when it is there, and says ok when not."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from pinecall_contracts.dispatch import FleetOffers, KeptRoom, OffersSnapshot
from pinecall_contracts.fleet import (
    FleetTotals,
    FleetView,
    RosterSnapshot,
    WorkerMinute,
    WorkerRow,
)
from pinecall_contracts.recordings import RecordingsFailedCount
from pinecall_runtime.doctor import diagnose
from pinecall_runtime.doctor.findings import Drop, Evidence, Finding, Unanswered, wrong
from pinecall_runtime.doctor.fleets import fleets, services, workers
from pinecall_runtime.doctor.intake import admission, followups, kept_rooms, webhooks
from pinecall_runtime.doctor.recordings import recordings
from pinecall_runtime.doctor.schema import migrations
from pinecall_servicekit.migrations import MigrationStatus

AT = dt.datetime(2026, 11, 30, 6, 49, tzinfo=dt.UTC)
SERVICES = ["roster", "dispatcher", "call-log", "webhook-ingest"]


def row(host: str, state: str = "accepting", **extra: Any) -> WorkerRow:
    fields: dict[str, Any] = {
        "worker": f"pinecall/{host}.1791067258",
        "agent_name": f"pinecall/{host}.1791067258",
        "state": state,
        "seats": 8,
        "active": 2,
        "load": 0.25,
        "first_audio_p95_s": 1.2,
        "last_heard_s": 3.0,
    }
    return WorkerRow(**(fields | extra))


def roster(*views: FleetView) -> RosterSnapshot:
    return RosterSnapshot(fleets=list(views), at=AT)


def fleet(name: str, *workers: WorkerRow, free: int = 6, seats: int = 8) -> FleetView:
    accepting = sum(w.state == "accepting" for w in workers)
    full = sum(w.state == "full" for w in workers)
    totals = FleetTotals(accepting=accepting, full=full, seats=seats, seats_free=free, calls=2)
    return FleetView(fleet=name, environment="production", workers=list(workers), totals=totals)


def levels(findings: list[Finding]) -> list[tuple[str, str]]:
    return [(f.level, f.subject) for f in findings]


HEALTHY = Evidence(
    services=SERVICES,
    roster=roster(fleet("pinecall", row("worker-a"))),
    offers=OffersSnapshot(fleets=[FleetOffers(fleet="pinecall", waiting=0)], kept=[], at=AT),
    drops=[],
    migrations={
        "roster": MigrationStatus(
            schema="roster", heads=["0001"], applied=["0001"], standing="at_head"
        )
    },
    recordings_failed=RecordingsFailedCount(since=AT, count=0),
)


def test_a_healthy_platform_is_all_ok_and_not_wrong() -> None:
    found = diagnose(HEALTHY)
    assert {f.level for f in found} == {"ok"}
    assert [f.check for f in found] == [
        "services",
        "fleets",
        "workers",
        "offers",
        "admission",
        "follow-ups",
        "webhooks",
        "recordings",
        "migrations",
    ]
    assert not wrong(found)


def test_a_service_that_does_not_answer_fails_and_its_checks_are_skipped() -> None:
    evidence = Evidence(
        services=SERVICES,
        unanswered=[
            Unanswered(
                service="dispatcher",
                asked="t.ops.dispatch.offers",
                problem="no replica answered t.ops.dispatch.offers in 2 s",
                todo="start dispatcher",
            )
        ],
        roster=HEALTHY.roster,
        drops=[],
        migrations=HEALTHY.migrations,
    )
    found = diagnose(evidence)
    assert levels(services(evidence)) == [("fail", "dispatcher")]
    assert ("skip", "offers") in levels(found)
    assert ("skip", "admission") in levels(found)
    assert wrong(found)


def test_a_fleet_nobody_heard_in_30_s_is_silent() -> None:
    silent = fleet(
        "pinecall-sandbox", row("worker-s", "silent", last_heard_s=45.0), free=0, seats=0
    )
    never = fleet("pinecall-dev", free=0, seats=0)
    found = fleets(roster(fleet("pinecall", row("worker-a")), silent, never))
    assert levels(found) == [("fail", "pinecall-sandbox"), ("fail", "pinecall-dev")]
    assert "silent: no worker heard in 30 s (last 45 s ago)" in found[0].what
    assert "none heard since the roster started" in found[1].what
    assert "PINECALL_FLEET=pinecall-sandbox" in found[0].todo


def test_a_full_fleet_warns_and_one_of_cordoned_workers_takes_no_call() -> None:
    full = fleet("pinecall", row("worker-a", "full", active=8), free=0)
    cordoned = fleet("pinecall-sandbox", row("worker-s", "cordoned"), free=0, seats=0)
    found = fleets(roster(full, cordoned))
    assert levels(found) == [("warn", "pinecall"), ("fail", "pinecall-sandbox")]
    assert found[0].what.startswith("full: none of its 8 seats free (2 calls)")
    assert found[1].what == "takes no call: every worker heard is cordoned"


def test_failing_workers_fail_with_their_minute_and_others_are_information() -> None:
    minute = WorkerMinute(ended=4, failed=3, errors=5, turns=9, first_audio_p95_s=1.4)
    found = workers(
        roster(
            fleet(
                "pinecall",
                row("worker-a"),
                row("worker-b", "failing", failing=True, minute=minute),
                row("worker-c", "cordoned", cordoned=True, active=1),
                row("worker-d", "draining", draining=True),
                row("worker-e", "silent", last_heard_s=61.0),
                row("worker-f", agent_name=None),
            )
        )
    )
    assert levels(found) == [
        ("fail", "pinecall/worker-b.1791067258"),
        ("info", "pinecall/worker-c.1791067258"),
        ("info", "pinecall/worker-d.1791067258"),
        ("info", "pinecall/worker-e.1791067258"),
        ("info", "pinecall/worker-f.1791067258"),
    ]
    assert "its last minute: 3 of 4 calls ended in error" in found[0].what
    assert "fleet cordon pinecall/worker-b" in found[0].todo
    assert "fleet uncordon pinecall/worker-c" in found[1].todo


def test_a_worker_livekit_has_not_held_for_15_s_warns_and_a_fleet_of_only_such_fails() -> None:
    lost = row("worker-b", agent_name=None, unregistered_s=40.4)
    found = workers(
        roster(
            fleet(
                "pinecall",
                row("worker-a"),
                lost,
                row("worker-c", agent_name=None, unregistered_s=3.0),  # starting
                row("worker-d", agent_name=None),  # an older worker says nothing of it
            )
        )
    )
    assert levels(found) == [
        ("ok", "workers"),
        ("warn", "pinecall/worker-b.1791067258"),
        ("info", "pinecall/worker-c.1791067258"),
        ("info", "pinecall/worker-d.1791067258"),
    ]
    assert found[1].what == (
        "heard by the roster but not registered with LiveKit for 40 s: it is offered no call"
    )
    assert "cannot reach LIVEKIT_URL" in found[1].todo
    assert levels(fleets(roster(fleet("pinecall", row("worker-a"), lost)))) == [("ok", "fleets")]
    [alone] = fleets(roster(fleet("pinecall", lost, row("worker-e", "cordoned", cordoned=True))))
    assert (alone.level, alone.subject) == ("fail", "pinecall")
    assert alone.what == (
        "no worker that takes calls is registered with LiveKit: its callers go to the overflow"
    )


def test_a_failing_worker_kept_counted_fails_too() -> None:
    minute = WorkerMinute(ended=0, turns=25, first_audio_p95_s=6.5)
    found = workers(roster(fleet("pinecall", row("worker-b", "full", failing=True, minute=minute))))
    assert levels(found) == [("fail", "pinecall/worker-b.1791067258")]
    assert found[0].what.startswith("failing (")
    assert "first audio p95 6.5 s over 25 turns" in found[0].what
    assert "no other worker of its fleet accepts" in found[0].what


def test_workers_are_ok_when_none_fails() -> None:
    found = workers(roster(fleet("pinecall", row("worker-a"), row("worker-b", "full"))))
    assert levels(found) == [("ok", "workers")]
    assert found[0].what == "none failing (2 heard in 30 s)"


def test_rooms_kept_in_offers_are_named_by_call_and_room() -> None:
    kept = KeptRoom(
        call="call_7Qm2x",
        room="call-_+15550100_7Qm2x",
        fleet="pinecall",
        environment="production",
        state="waiting",
        offers=2,
        worker="pinecall/worker-a.1791067258",
        arrived_at=AT,
        kept_s=75.2,
    )
    waited = FleetOffers(fleet="pinecall", waiting=3)
    found = kept_rooms(OffersSnapshot(fleets=[waited], kept=[kept], at=AT))
    assert levels(found) == [("fail", "call_7Qm2x"), ("info", "pinecall")]
    assert "room call-_+15550100_7Qm2x of pinecall (production) kept in offers 75 s" in (
        found[0].what
    )
    assert "the last to pinecall/worker-a.1791067258" in found[0].what
    assert found[0].todo.startswith("pinecall-runtime logs call_7Qm2x")
    assert found[1].what.startswith("3 rooms waited for a worker in 10 min")


def test_rooms_that_waited_while_a_worker_was_cordoned_blame_the_cordon() -> None:
    """Seen: "a worker or LiveKit dropped an offer" when an operator's cordon was the cause."""
    waited = OffersSnapshot(fleets=[FleetOffers(fleet="pinecall", waiting=2)], kept=[], at=AT)
    cordoned = roster(
        fleet("pinecall", row("worker-a"), row("worker-b", "cordoned", cordoned=True)),
        fleet("pinecall-sandbox", row("worker-s", "draining", draining=True)),
    )
    [_, found] = kept_rooms(waited, cordoned)
    assert found.what == (
        "2 rooms waited for a worker in 10 min (offered again, or sent to the overflow for want "
        "of an open): pinecall/worker-b.1791067258 cordoned or draining in that time, so an "
        "offer to it not yet opened was declined and offered again (else a worker or LiveKit "
        "dropped an offer)"
    )
    assert found.todo.startswith("an operator's cordon or a drain")
    gone = roster(fleet("pinecall", row("worker-b", "silent", cordoned=True, last_heard_s=900)))
    for snapshot in (roster(fleet("pinecall", row("worker-a"))), gone):
        [_, plain] = kept_rooms(waited, snapshot)
        assert plain.what.endswith(
            ": a worker or LiveKit dropped an offer (no worker of the fleet was cordoned or "
            "draining)"
        )


def test_a_room_the_overflow_did_not_take_says_to_start_the_overflow() -> None:
    """The last resort took no room: no agent will take it, until an overflow runs."""
    kept = KeptRoom(
        call="call_7Qm2x", room="r", fleet="pinecall", environment="production",
        state="overflow", offers=4, worker="pinecall/overflow", arrived_at=AT, kept_s=64.0,
    )  # fmt: skip
    [found] = kept_rooms(OffersSnapshot(fleets=[], kept=[kept], at=AT))
    assert found.level == "fail"
    assert found.todo.startswith("the overflow pinecall/overflow took none of it: start it")
    assert "PINECALL_FLEET=pinecall" in found.todo


def test_refusals_at_admission_warn_by_fleet_and_reason() -> None:
    refused = FleetOffers(fleet="pinecall", waiting=0, refused={"fleet_full": 1, "not_ready": 4})
    found = admission(OffersSnapshot(fleets=[refused], kept=[], at=AT))
    assert levels(found) == [("warn", "pinecall")]
    assert found[0].what == "5 callers refused at admission in 10 min: 4 not_ready, 1 fleet_full"
    assert found[0].todo.startswith("start workers")
    assert levels(admission(HEALTHY.offers)) == [("ok", "admission")]


def test_follow_ups_waiting_inform_and_call_backs_not_reached_past_half_warn() -> None:
    """Seed 003: "past the failure threshold inside the health window, calls that never rang
    raise the finding"; the line is half of the call backs ended in 10 min, 4 at least."""
    waiting = FleetOffers(fleet="pinecall", waiting=0, followups=3, followups_due=1)
    unreached = FleetOffers(
        fleet="pinecall-sandbox", waiting=0, tries=4, not_reached=2, environment="sandbox"
    )
    found = followups(OffersSnapshot(fleets=[waiting, unreached], kept=[], at=AT))
    assert levels(found) == [("info", "pinecall"), ("warn", "pinecall-sandbox")]
    assert found[0].what == "3 follow-ups waiting to be dialled (1 due now)"
    assert "when pinecall has a seat free" in found[0].todo
    assert found[1].what == "2 of 4 call backs ended in 10 min not reached (the line is 50%)"
    assert "capacity or dispatch signal" in found[1].todo
    below = [
        FleetOffers(fleet="a", waiting=0, tries=3, not_reached=3),  # too few to judge
        FleetOffers(fleet="b", waiting=0, tries=9, not_reached=4),  # under half
    ]
    under = followups(OffersSnapshot(fleets=below, kept=[], at=AT))
    assert levels(under) == [("ok", "follow-ups")]
    # the ok line says the count under the line, never "none" where fleet list shows some
    assert under[0].what == (
        "no follow-up waiting; 7 of 12 call backs ended in 10 min not reached "
        "(the line: 50% of 4 or more)"
    )
    quiet = followups(OffersSnapshot(fleets=[FleetOffers(fleet="a", waiting=0)], kept=[], at=AT))
    assert quiet[0].what == "no follow-up waiting; no call back ended in 10 min"
    assert levels(followups(None)) == [("skip", "follow-ups")]


def test_refused_webhooks_warn_with_their_detail_and_duplicates_inform() -> None:
    found = webhooks(
        [
            Drop(environment="production", reason="duplicate", count=7),
            Drop(
                environment="production",
                reason="unknown_key",
                count=10_000,
                detail="signed by an unknown API key 'APIxyz'",
                at_least=True,
            ),
        ]
    )
    assert levels(found) == [("warn", "production"), ("info", "production")]
    assert found[0].what.startswith("at least 10000 webhooks refused in 10 min, unknown_key")
    assert "APIxyz" in found[0].what
    assert "PINECALL_LIVEKIT_KEYS" in found[0].todo
    assert levels(webhooks([Drop(environment="sandbox", reason="duplicate", count=1)])) == [
        ("ok", "webhooks"),
        ("info", "sandbox"),
    ]


def test_one_of_a_thing_is_said_in_the_singular() -> None:
    """An operator reads "1 call", never "1 calls" (stop 12's trial read "finishing 1 calls")."""
    _, cordoned = workers(roster(fleet("pinecall", row("worker-a", "cordoned", active=1))))
    assert cordoned.what == "cordoned: finishing 1 call, then it exits 3"
    one = WorkerMinute(ended=1, failed=1, errors=1, turns=1, first_audio_p95_s=6.0)
    [failing] = workers(roster(fleet("pinecall", row("worker-a", "failing", minute=one))))
    assert "its last minute: 1 of 1 call ended in error, first audio p95 6.0 s over 1 turn" in (
        failing.what
    )
    [full] = fleets(roster(fleet("pinecall", row("worker-a", "full", seats=1), free=0, seats=1)))
    assert full.what.startswith("full: none of its 1 seat free (2 calls)")
    refused = FleetOffers(fleet="pinecall", waiting=1, refused={"fleet_full": 1})
    snapshot = OffersSnapshot(fleets=[refused], kept=[], at=AT)
    assert admission(snapshot)[0].what == "1 caller refused at admission in 10 min: 1 fleet_full"
    assert kept_rooms(snapshot)[1].what.startswith("1 room waited for a worker in 10 min")
    dropped = [
        Drop(environment="production", reason="forged", count=1),
        Drop(environment="production", reason="duplicate", count=1),
    ]
    said = [f.what for f in webhooks(dropped)]
    assert said[0].startswith("1 webhook refused in 10 min, forged")
    assert said[1].startswith("1 duplicate delivery dropped in 10 min")


@pytest.mark.parametrize(
    ("applied", "standing", "level", "words"),
    [
        (["0001"], "behind", "fail", "stale: the database is at 0001, its scripts at 0002"),
        ([], "never", "fail", "never migrated (no calllog.alembic_version)"),
        (["0003"], "ahead", "warn", "a newer release migrated it"),
    ],
)
def test_migrations_not_at_head_are_named(
    applied: list[str], standing: Any, level: str, words: str
) -> None:
    status = MigrationStatus(schema="calllog", heads=["0002"], applied=applied, standing=standing)
    found = migrations({"call-log": status, **(HEALTHY.migrations or {})})
    assert levels(found) == [(level, "call-log")]
    assert words in found[0].what


def test_a_source_that_did_not_answer_is_skipped_not_guessed() -> None:
    assert levels(fleets(None)) == [("skip", "fleets")]
    assert levels(webhooks(None)) == [("skip", "webhooks")]
    assert levels(migrations(None)) == [("skip", "migrations")]
    assert levels(migrations({"worker": "not told: an older release"})) == [("skip", "worker")]


def test_recordings_that_failed_in_the_hour_warn_by_environment_and_say_the_last() -> None:
    failed = RecordingsFailedCount(
        since=AT,
        count=3,
        environments={"sandbox": 1, "production": 2},
        last_call="call_9",
        last_reason="UploadPart on recordings: 403 AccessDenied",
    )
    found = recordings(failed)
    assert levels(found) == [("warn", "production"), ("warn", "sandbox")]
    assert found[0].what == (
        "2 recordings failed in 60 min (the last: call_9, UploadPart on recordings: 403 "
        "AccessDenied)"
    )
    assert found[1].what == "1 recording failed in 60 min"
    assert "PINECALL_RECORDINGS_BUCKET" in found[0].todo
    assert wrong(found)
    assert levels(recordings(None)) == [("skip", "recordings")]
    assert levels(recordings(RecordingsFailedCount(since=AT, count=0))) == [("ok", "recordings")]
