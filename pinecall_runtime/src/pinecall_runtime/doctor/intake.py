"""``doctor``'s rules of intake: rooms kept in offers, refusals at admission, follow-ups waiting
and call backs not reached, dropped webhooks.

Source: ``shared/DESIGN.md``, "The operator's surface" and "Where the seeds disagree" (refusals
are intake health: they leave no call record); seed 000, "Who takes a call" (a room kept in offers
past a minute; rooms that waited); the dispatcher's ``OffersSnapshot`` and webhook-ingest's drops
stream are the sources.
"""

from __future__ import annotations

from collections.abc import Sequence

from pinecall_contracts.dispatch import FleetOffers, KeptRoom, OffersSnapshot
from pinecall_contracts.fleet import RosterSnapshot
from pinecall_contracts.ids import is_overflow
from pinecall_contracts.words import counted
from pinecall_runtime.doctor import runbook
from pinecall_runtime.doctor.findings import Drop, Finding, ok, skip


def _kept_todo(k: KeptRoom) -> str:
    if k.worker is not None and is_overflow(k.worker):
        # the last resort did not take it: no agent will, until one runs
        return (
            f"the overflow {k.worker} took none of it: start it (pinecall-runtime overflow "
            f"start with PINECALL_FLEET={k.fleet}), or see why it is not registered on "
            f"{k.environment}'s LiveKit; pinecall-runtime logs {k.call}"
        )
    return runbook.KEPT.format(call=k.call)


WINDOW_S = 600.0
"""The dispatcher's window of rooms that waited and of refusals (ten minutes)."""


def _held_back(fleet: str, roster: RosterSnapshot | None) -> list[str]:
    """Workers of ``fleet`` the roster says are cordoned or draining and heard in the window:
    an operator's cordon or a drain, whose offers not yet opened are declined (or lost with the
    worker's exit) and offered again 12 s later."""
    if roster is None:
        return []
    return sorted(
        w.worker
        for view in roster.fleets
        if view.fleet == fleet
        for w in view.workers
        if (w.cordoned or w.draining or w.state in ("cordoned", "draining"))
        and w.last_heard_s < WINDOW_S
    )


def _waited(f: FleetOffers, roster: RosterSnapshot | None) -> Finding:
    waited = (
        f"{counted(f.waiting, 'room')} waited for a worker in 10 min (offered again, or sent to "
        "the overflow for want of an open)"
    )
    if held := _held_back(f.fleet, roster):
        named = ", ".join(held[:3]) + (f" and {len(held) - 3} more" if len(held) > 3 else "")
        return Finding(
            check="offers",
            level="info",
            subject=f.fleet,
            what=f"{waited}: {named} cordoned or draining in that time, so an offer to it not yet "
            "opened was declined and offered again (else a worker or LiveKit dropped an offer)",
            todo="an operator's cordon or a drain; pinecall-runtime logs CALL of its calls says "
            "which worker each waited for",
        )
    return Finding(
        check="offers",
        level="info",
        subject=f.fleet,
        what=f"{waited}: a worker or LiveKit dropped an offer"
        + ("" if roster is None else " (no worker of the fleet was cordoned or draining)"),
        todo=runbook.WAITED,
    )


def kept_rooms(
    offers: OffersSnapshot | None, roster: RosterSnapshot | None = None
) -> list[Finding]:
    """Rooms kept in offers past a minute, each by call and room; rooms that waited, by fleet,
    blamed on a cordon or a drain where the roster shows one of the fleet's workers cordoned or
    draining in the window (``roster``; without it, on a dropped offer)."""
    if offers is None:
        return [skip("offers", "dispatcher")]
    found = [
        Finding(
            check="offers",
            level="fail",
            subject=k.call,
            what=f"room {k.room} of {k.fleet} ({k.environment}) kept in offers {k.kept_s:.0f} s: "
            f"{k.state}, {counted(k.offers, 'offer')}, the last to {k.worker or 'nobody'}; its "
            "caller waits",
            todo=_kept_todo(k),
        )
        for k in offers.kept
    ]
    if not found:
        found.append(ok("offers", "no room kept in offers past a minute"))
    found += [_waited(f, roster) for f in offers.fleets if f.waiting]
    return found


ADMISSION_TODO = runbook.ADMISSION


def admission(offers: OffersSnapshot | None) -> list[Finding]:
    """Refusals at the token endpoint in the last ten minutes, by fleet and reason (seed 003:
    intake health, since a refusal leaves no call record)."""
    if offers is None:
        return [skip("admission", "dispatcher")]
    found = []
    for f in offers.fleets:
        if not f.refused:
            continue
        reasons = sorted(f.refused.items(), key=lambda r: (-r[1], r[0]))
        found.append(
            Finding(
                check="admission",
                level="warn",
                subject=f.fleet,
                what=f"{counted(sum(f.refused.values()), 'caller')} refused at admission in 10 "
                "min: " + ", ".join(f"{n} {reason}" for reason, n in reasons),
                todo="; ".join(
                    ADMISSION_TODO.get(r, runbook.ADMISSION_OTHER.format(reason=r))
                    for r, _ in reasons
                ),
            )
        )
    return found or [ok("admission", "no caller refused at admission in 10 min")]


NOT_REACHED_SHARE = 0.5
"""The share of a fleet's call backs ended in the window that were not reached past which
``doctor`` warns (seed 003: "past the failure threshold inside the health window"), as the
roster's failing line counts half of a minute's calls."""
NOT_REACHED_LEAST = 4
"""Call backs ended in the window below which no share is judged (as the failing line's 4)."""


def followups(offers: OffersSnapshot | None) -> list[Finding]:
    """Follow-ups waiting to be dialled (call backs owed), by fleet; a warning when the call
    backs not reached in the last ten minutes pass :data:`NOT_REACHED_SHARE` of those ended
    (at least :data:`NOT_REACHED_LEAST`)."""
    if offers is None:
        return [skip("follow-ups", "dispatcher")]
    found = []
    for f in offers.fleets:
        if f.followups:
            found.append(
                Finding(
                    check="follow-ups",
                    level="info",
                    subject=f.fleet,
                    what=f"{counted(f.followups, 'follow-up')} waiting to be dialled "
                    f"({f.followups_due} due now)",
                    todo=runbook.FOLLOW_UPS_WAITING.format(fleet=f.fleet, full=runbook.FULL),
                )
            )
        if f.tries >= NOT_REACHED_LEAST and f.not_reached >= NOT_REACHED_SHARE * f.tries:
            found.append(
                Finding(
                    check="follow-ups",
                    level="warn",
                    subject=f.fleet,
                    what=f"{f.not_reached} of {counted(f.tries, 'call back')} ended in 10 min "
                    f"not reached (the line is {NOT_REACHED_SHARE:.0%})",
                    todo=runbook.NOT_REACHED,
                )
            )
    if found:
        return found
    tries = sum(f.tries for f in offers.fleets)
    missed = sum(f.not_reached for f in offers.fleets)
    reached = (
        "no call back ended in 10 min"
        if tries == 0
        else f"{missed} of {counted(tries, 'call back')} ended in 10 min not reached (the line: "
        f"{NOT_REACHED_SHARE:.0%} of {NOT_REACHED_LEAST} or more)"
    )
    return [ok("follow-ups", f"no follow-up waiting; {reached}")]


WEBHOOK_TODO = runbook.WEBHOOKS


def webhooks(drops: Sequence[Drop] | None) -> list[Finding]:
    """Webhooks refused in the last ten minutes, by environment and reason (events lost: a
    caller nobody offers); duplicates dropped as information (LiveKit delivers again)."""
    if drops is None:
        return [
            Finding(
                check="webhooks",
                level="skip",
                subject="webhooks",
                what="not checked: no drops stream to read (NATS did not answer, or no "
                "webhook-ingest of this release has started on this namespace)",
            )
        ]
    found = []
    for d in sorted(drops, key=lambda d: (d.reason == "duplicate", d.environment, d.reason)):
        at_least = "at least " if d.at_least else ""
        if d.reason == "duplicate":
            deliveries = counted(d.count, "duplicate delivery", "duplicate deliveries")
            found.append(
                Finding(
                    check="webhooks",
                    level="info",
                    subject=d.environment,
                    what=f"{at_least}{deliveries} dropped in 10 min (LiveKit delivered again; "
                    "each event was passed on once)",
                )
            )
            continue
        last = f" (the last: {d.detail})" if d.detail else ""
        found.append(
            Finding(
                check="webhooks",
                level="warn",
                subject=d.environment,
                what=f"{at_least}{counted(d.count, 'webhook')} refused in 10 min, "
                f"{d.reason}{last}: their events are lost",
                todo=WEBHOOK_TODO.get(d.reason, runbook.WEBHOOKS_OTHER),
            )
        )
    if not any(f.level == "warn" for f in found):
        found.insert(0, ok("webhooks", "no webhook refused in 10 min"))
    return found
