"""Who takes a call, as pure functions of plain values (seed 000, "Who takes a call"; issue 7).

A room is offered to the worker of its fleet heard in the last 12 s with the most seats free,
counting the calls offered to it and not opened yet; cordoned, draining and failing workers are
not offered (the roster's states already say so: only ``accepting`` workers are candidates). A
room no worker opened 12 s after its offer is offered to another; after three offers, or when no
worker heard lately has a seat, it goes to the fleet's overflow. A fleet none of whose workers was
heard in 12 s waits up to 12 s from the caller's arrival, then overflows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

import msgspec

from pinecall_contracts.fleet import WorkerRow

HEARD_S = 12.0
"""A worker heard within this many seconds may be offered a call."""
REOFFER_S = 12.0
"""A room not opened this many seconds after its offer is offered to another worker."""
MOST_OFFERS = 3
"""Offers a room gets before it goes to the overflow."""
FLEET_WAIT_S = 12.0
"""How long a room of a fleet nobody has heard waits (from the caller's arrival) for a worker."""


class Room(msgspec.Struct, frozen=True, kw_only=True):
    """A room kept in offers: when the caller arrived, and the offers made so far (oldest first)."""

    name: str
    arrived_at: float
    offers: tuple[tuple[str, float], ...] = ()
    """``(worker name, offered at)`` pairs, in order."""


class Offer(msgspec.Struct, frozen=True, kw_only=True):
    worker: str
    seats_free: int
    heard_s: float
    number: int
    """1 for the first offer of the room."""

    def journal(self, room: str) -> str:
        """The line the dispatcher's log says: who was offered and why."""
        return (
            f"room {room}: offered to {self.worker}: {self.seats_free} seats free, "
            f"heard {self.heard_s:.0f} s ago (offer {self.number})"
        )


class Overflow(msgspec.Struct, frozen=True, kw_only=True):
    reason: Literal["three_offers", "no_seat", "nobody_heard"]


class Wait(msgspec.Struct, frozen=True, kw_only=True):
    until: float
    """When the room should be looked at again."""


Decision = Offer | Overflow | Wait


def seats_free(row: WorkerRow, pending: Mapping[str, int]) -> int:
    """A worker's seats not held by a call nor promised to a room offered and not opened."""
    return row.seats - row.active - pending.get(row.worker, 0)


def candidates(
    rows: Sequence[WorkerRow], pending: Mapping[str, int], exclude: frozenset[str] = frozenset()
) -> list[WorkerRow]:
    """Workers that may be offered a call now, the most seats free first (then by name)."""
    eligible = [
        r
        for r in rows
        if r.state == "accepting"
        and r.agent_name is not None
        and r.last_heard_s < HEARD_S
        and r.worker not in exclude
        and seats_free(r, pending) > 0
    ]
    return sorted(eligible, key=lambda r: (-seats_free(r, pending), r.worker))


def decide(
    room: Room, rows: Sequence[WorkerRow], pending: Mapping[str, int], now: float
) -> Decision:
    """What to do with ``room`` at ``now``, given the fleet's rows and the offers pending.

    A worker offered this room before is not offered it again (it declined or never answered).
    """
    if room.offers:
        last_at = room.offers[-1][1]
        if now - last_at < REOFFER_S:
            return Wait(until=last_at + REOFFER_S)
        if len(room.offers) >= MOST_OFFERS:
            return Overflow(reason="three_offers")
    if not any(r.last_heard_s < HEARD_S for r in rows):
        if now - room.arrived_at < FLEET_WAIT_S:
            return Wait(until=room.arrived_at + FLEET_WAIT_S)
        return Overflow(reason="nobody_heard")
    tried = frozenset(worker for worker, _ in room.offers)
    chosen = candidates(rows, pending, tried)
    if not chosen:
        return Overflow(reason="no_seat")
    best = chosen[0]
    return Offer(
        worker=best.worker,
        seats_free=seats_free(best, pending),
        heard_s=best.last_heard_s,
        number=len(room.offers) + 1,
    )


def sweep(
    rooms: Sequence[Room], rows: Sequence[WorkerRow], pending: Mapping[str, int], now: float
) -> list[tuple[Room, Decision]]:
    """Decide every room of one fleet in arrival order; each offer made counts as pending for
    the rooms after it, so one sweep never promises a worker more seats than it has."""
    promised = dict(pending)
    out = []
    for room in sorted(rooms, key=lambda r: r.arrived_at):
        decision = decide(room, rows, promised, now)
        if isinstance(decision, Offer):
            promised[decision.worker] = promised.get(decision.worker, 0) + 1
        out.append((room, decision))
    return out
