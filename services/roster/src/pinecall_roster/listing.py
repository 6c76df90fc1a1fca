"""``fleet list`` as text: a fleet's headline, what is wrong with the fleet, and its workers.

Source: ``shared/DESIGN.md``, "The operator's surface": per fleet and worker, state (accepting,
full, failing, cordoned, silent, draining), seats, calls, load, first audio p95; per fleet the
rooms waiting and the refusals at admission of the last ten minutes (the dispatcher's
``FleetOffers``; left out when no dispatcher answered). Pure functions of the snapshots.
"""

from __future__ import annotations

from collections.abc import Mapping

from pinecall_contracts.dispatch import FleetOffers
from pinecall_contracts.fleet import FleetView, WorkerRow
from pinecall_contracts.words import counted
from pinecall_roster.domain import FLEET_WAIT_S, HEARD_S
from pinecall_servicekit.operator import table

HEADERS = (
    "worker",
    "state",
    "seats",
    "calls",
    "load",
    "p95 s",
    "failed",
    "cpu",
    "heard",
    "livekit",
)
KEPT = "*"
"""Marks a failing worker that still counts: no other worker of its fleet accepts."""
UNKNOWN = "-"
"""LIVEKIT of a worker not heard in the dispatcher's window (:data:`HEARD_S`): what its last
heartbeat said LiveKit held is not known to hold now (it may have exited)."""


def headline(view: FleetView, offers: FleetOffers | None, dispatcher: bool) -> str:
    """``pinecall (production): 1 accepting, 1 full, 1 failing, 5/16 seats free, 11 calls,
    2 refused at admission (2 not_ready), 1 room waiting in 10 min``. Counts of failing,
    cordoned, draining and silent workers and of refusals appear only when not 0; rooms waiting
    only when a dispatcher answered (``dispatcher``); follow-ups waiting (call backs owed, and
    those due now waiting for a seat) and call backs not reached in 10 min only when not 0."""
    t = view.totals
    parts = [f"{t.accepting} accepting", f"{t.full} full"]
    for state in ("failing", "cordoned", "draining", "silent"):
        n = sum(w.state == state for w in view.workers)
        if n:
            parts.append(f"{n} {state}")
    parts += [f"{t.seats_free}/{counted(t.seats, 'seat')} free", counted(t.calls, "call")]
    if offers is not None and offers.refused:
        reasons = sorted(offers.refused.items(), key=lambda r: (-r[1], r[0]))
        parts.append(
            f"{sum(offers.refused.values())} refused at admission ("
            + ", ".join(f"{n} {reason}" for reason, n in reasons)
            + ")"
        )
    if dispatcher:
        parts.append(f"{counted(offers.waiting if offers else 0, 'room')} waiting in 10 min")
    if offers is not None and offers.followups:
        parts.append(
            f"{counted(offers.followups, 'follow-up')} waiting ({offers.followups_due} due now)"
        )
    if offers is not None and offers.tries:
        parts.append(
            f"{offers.not_reached}/{counted(offers.tries, 'call back')} not reached in 10 min"
        )
    return f"{view.fleet} ({view.environment or '?'}): " + ", ".join(parts)


def fleet_state(view: FleetView) -> str | None:
    """What is wrong with the fleet as a whole, or None: silent, taking no call, or full."""
    t = view.totals
    live = [w for w in view.workers if w.state != "silent"]
    if not live:
        return (
            f"silent: no worker heard in 30 s; its callers wait {FLEET_WAIT_S:.0f} s, "
            "then go to the overflow"
        )
    if t.accepting + t.full == 0:
        return "takes no call: every worker heard is cordoned, draining or failing"
    if t.seats_free == 0:
        return "full: no seat free; new callers hear the overflow"
    return None


def _row(w: WorkerRow) -> tuple[object, ...]:
    minute = w.minute
    return (
        w.worker,
        w.state + (KEPT if w.failing and w.state in ("accepting", "full") else ""),
        w.seats,
        w.active,
        f"{w.load:.2f}",
        None if w.first_audio_p95_s is None else f"{w.first_audio_p95_s:.2f}",
        None if minute is None else f"{minute.failed}/{minute.ended}",
        None if w.load_per_core is None else f"{w.load_per_core:.2f}",
        f"{w.last_heard_s:.0f}s",
        livekit(w),
    )


def livekit(w: WorkerRow) -> str:
    """LIVEKIT: ``yes``/``no`` as its heartbeat said, while it was heard in the last
    :data:`HEARD_S`; :data:`UNKNOWN` after (a worker that exited 60 s ago is registered nowhere)."""
    if w.last_heard_s >= HEARD_S:
        return UNKNOWN
    return "yes" if w.agent_name else "no"


def fleet_lines(view: FleetView, offers: Mapping[str, FleetOffers] | None) -> list[str]:
    """Every line ``fleet list`` prints for ``view``: the headline, the fleet's state when
    something is wrong with it, the workers' table and what a ``*`` means when one is marked."""
    lines = [headline(view, None if offers is None else offers.get(view.fleet), offers is not None)]
    state = fleet_state(view)
    if state:
        lines.append(f"  {state}")
    if view.workers:
        lines.append(table(HEADERS, [_row(w) for w in view.workers]))
    if any(w.failing and w.state in ("accepting", "full") for w in view.workers):
        lines.append(f"{KEPT} failing, still offered calls: no other worker accepts")
    if any(livekit(w) == UNKNOWN for w in view.workers):
        lines.append(
            f"{UNKNOWN} in LIVEKIT: not heard in {HEARD_S:.0f} s, so whether LiveKit holds it now "
            "is not known; it is offered no call"
        )
    return lines
