"""``doctor``'s rules of the roster: services that answer, fleets, workers.

Source: ``shared/DESIGN.md``, "The operator's surface" and "Numbers the runtime lives by" (silent
30 s, failing); seed 000, "The gateway hears every worker", "A worker that is up but bad".
The states are the roster's own (``WorkerRow.state``): nothing here recounts them.
"""

from __future__ import annotations

from collections.abc import Iterator

from pinecall_contracts.fleet import FleetView, RosterSnapshot, WorkerMinute, WorkerRow
from pinecall_contracts.ids import worker_key
from pinecall_contracts.words import counted
from pinecall_runtime.doctor import runbook
from pinecall_runtime.doctor.findings import Evidence, Finding, Level, ok, skip

UNREGISTERED_S = 15.0
"""A worker heard but not registered with LiveKit this long is a warning (three heartbeats: more
than a start takes to register), not the information a starting worker is."""


def services(evidence: Evidence) -> list[Finding]:
    """A service that did not answer (or answered an error) is a failure of its own."""
    found = [
        Finding(
            check="services",
            level="fail",
            subject=u.service,
            what=u.problem,
            todo=u.todo,
        )
        for u in evidence.unanswered
    ]
    if found:
        return found
    return [ok("services", "every service answers: " + ", ".join(evidence.services))]


def fleets(roster: RosterSnapshot | None) -> list[Finding]:
    """Silent fleets (no worker heard in 30 s), fleets that take no call (none counted, or none
    of those registered with LiveKit), full fleets."""
    if roster is None:
        return [skip("fleets", "roster")]
    if not roster.fleets:
        return [
            Finding(
                check="fleets",
                level="fail",
                subject="roster",
                what="the roster knows no fleet: no fleets row, no worker heard",
                todo="set PINECALL_FLEETS on the roster and start workers",
            )
        ]
    found = [f for view in roster.fleets for f in _fleet(view)]
    if found:
        return found
    free = ", ".join(f"{v.fleet} {v.totals.seats_free}/{v.totals.seats}" for v in roster.fleets)
    return [ok("fleets", f"every fleet is heard and has a seat free ({free} seats free)")]


def _fleet(view: FleetView) -> Iterator[Finding]:
    t = view.totals
    live = [w for w in view.workers if w.state != "silent"]

    def finding(level: Level, what: str, todo: str) -> Finding:
        return Finding(check="fleets", level=level, subject=view.fleet, what=what, todo=todo)

    if not live:
        last = min((w.last_heard_s for w in view.workers), default=None)
        since = "none heard since the roster started" if last is None else f"last {last:.0f} s ago"
        yield finding(
            "fail",
            f"silent: no worker heard in 30 s ({since}); its callers wait 12 s, then go to the "
            "overflow",
            runbook.SILENT.format(fleet=view.fleet),
        )
    elif t.accepting + t.full == 0:
        states = ", ".join(sorted({w.state for w in live}))
        yield finding(
            "fail",
            f"takes no call: every worker heard is {states}",
            runbook.NO_CALL,
        )
    elif not any(w.agent_name for w in live if w.state in ("accepting", "full")):
        yield finding(
            "fail",
            "no worker that takes calls is registered with LiveKit: its callers go to the overflow",
            runbook.UNREGISTERED_FLEET,
        )
    elif t.seats_free == 0:
        yield finding(
            "warn",
            f"full: none of its {counted(t.seats, 'seat')} free ({counted(t.calls, 'call')}); new "
            "callers hear the "
            "overflow",
            runbook.FULL,
        )


def workers(roster: RosterSnapshot | None) -> list[Finding]:
    """Failing workers (and one failing but still offered calls); one heard but not
    registered with LiveKit for ``UNREGISTERED_S`` as a warning; cordoned, draining, silent and
    not-yet-registered workers as information."""
    if roster is None:
        return [skip("workers", "roster")]
    rows = [w for view in roster.fleets for w in view.workers]
    found = [f for w in rows if (f := _worker(w)) is not None]
    if not any(f.level == "fail" for f in found):
        heard = sum(w.state != "silent" for w in rows)
        found.insert(0, ok("workers", f"none failing ({heard} heard in 30 s)"))
    return found


def _worker(w: WorkerRow) -> Finding | None:
    key = worker_key(w.worker)

    def finding(level: Level, what: str, todo: str = "") -> Finding:
        return Finding(check="workers", level=level, subject=w.worker, what=what, todo=todo)

    if w.state == "failing":
        return finding(
            "fail",
            f"failing ({_minute(w.minute, w.first_audio_p95_s)}); offered no call while "
            "another worker of its fleet accepts",
            runbook.FAILING.format(worker=key),
        )
    if w.failing and w.state in ("accepting", "full"):
        return finding(
            "fail",
            f"failing ({_minute(w.minute, w.first_audio_p95_s)}) but still "
            "offered calls: no other worker of its fleet accepts",
            runbook.FAILING_KEPT,
        )
    if w.state == "cordoned":
        return finding(
            "info",
            f"cordoned: finishing {counted(w.active, 'call')}, then it exits 3",
            f"pinecall-runtime fleet uncordon {key} takes it back",
        )
    if w.state == "draining":
        return finding(
            "info", f"draining: finishing {counted(w.active, 'call')}, taking no new one"
        )
    if w.state == "silent":
        return finding(
            "info",
            f"silent for {w.last_heard_s:.0f} s: no longer capacity (forgotten after an hour)",
            "nothing, if it stopped; if it runs, its heartbeats do not reach the roster",
        )
    if w.agent_name is None:
        if w.unregistered_s is not None and w.unregistered_s >= UNREGISTERED_S:
            return finding(
                "warn",
                f"heard by the roster but not registered with LiveKit for "
                f"{w.unregistered_s:.0f} s: it is offered no call",
                "it cannot reach LIVEKIT_URL, or LiveKit there does not answer it: its logs say "
                "why ('LiveKit no longer holds this worker', 'failed to connect to livekit')",
            )
        return finding(
            "info",
            "heard, not yet registered on LiveKit: counted, offered no call",
            "if it lasts, the worker cannot reach LIVEKIT_URL (its logs say why)",
        )
    return None


def _minute(minute: WorkerMinute | None, p95: float | None) -> str:
    if minute is None:
        return "its minute unknown" if p95 is None else f"first audio p95 {p95:.1f} s"
    said = f"its last minute: {minute.failed} of {counted(minute.ended, 'call')} ended in error"
    if minute.first_audio_p95_s is not None:
        turns = counted(minute.turns, "turn")
        said += f", first audio p95 {minute.first_audio_p95_s:.1f} s over {turns}"
    return said
