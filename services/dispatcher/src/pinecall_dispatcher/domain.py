"""Who takes a call, as pure functions of plain values (seed 000, "Who takes a call"; issue 7).

A room is offered to the worker of its fleet heard in the last 12 s with the most seats free,
counting the calls offered to it and not opened yet; cordoned, draining and failing workers are
not offered (the roster's states already say so: only ``accepting`` workers are candidates). A
room no worker opened 12 s after its offer is offered to another; after three offers, or when no
worker heard lately has a seat, it goes to the fleet's overflow. A fleet none of whose workers was
heard in 12 s waits up to 12 s from the caller's arrival, then overflows.

**A worker that dies** (seed 000, "A worker that dies"; issue 8): an agent that leaves any way
LiveKit does not count as on purpose has lost its worker (:func:`agent_lost`). Its room gets the
overflow's sentence when its caller is still there and its call still open (:func:`sentence_due`),
and is kept in offers again as a ``sentence`` room whose ``tried`` starts with the lost worker. It
is offered like any call (to the worker with the most seats free, never the lost one; again after
12 s; after three offers, or with no seat, to the overflow), but a fleet none of whose other
workers is heard is not full: the sentence waits for a worker to be heard, and never goes to the
overflow for that (the reaper seals the call after five quiet minutes if nothing comes).

**Seats free** are ``seats − active − not counted``. A worker's heartbeat (every 5 s) counts the
calls it holds; between a worker taking a job and its next heartbeat that job is in no heartbeat.
The dispatcher knows every room it offered to a worker and not yet opened (*offered*) and every
call it saw a worker open and not end (*held*). Every job of a worker's name comes from the
dispatcher's offers, so ``offered + held`` is what the worker has or will have, and a heartbeat
counts at most that many (``active ≤ offered + held``). So what the heartbeat does not count yet
is ``max(0, offered + held − active)`` (:func:`not_counted`): a stale heartbeat is topped up, a
fresh one is not counted twice, and ``seats − active − not counted = seats − (offered + held)``
whenever the dispatcher's knowledge is whole. Where it is not (a call the dispatcher never saw),
the heartbeat's own count wins, since ``max`` never goes below ``active``.

**Admission** (seed 003, DESIGN.md "Where the seeds disagree") reads the same count: a fleet with
no worker heard for 90 s is ``not_ready``; one with no candidate is refused for what is true of
it: ``unheard`` (no worker heard in the last 12 s), ``cordoned`` (every worker heard lately is
cordoned or draining), else ``fleet_full`` (the workers heard lately are full, by the
rule above). Calls are counted, never load per core.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Literal

import msgspec

from pinecall_contracts.fleet import WorkerRow
from pinecall_contracts.words import counted

HEARD_S = 12.0
"""A worker heard within this many seconds may be offered a call."""
REOFFER_S = 12.0
"""A room not opened this many seconds after its offer is offered to another worker."""
MOST_OFFERS = 3
"""Offers a room gets before it goes to the overflow."""
FLEET_WAIT_S = 12.0
"""How long a room of a fleet nobody has heard waits (from the caller's arrival) for a worker."""
NOT_READY_S = 90.0
"""A fleet with no worker heard for this long is refused at admission (seed 003)."""

CALLER_KINDS = frozenset({"STANDARD", "SIP"})
"""Participants that are people calling: a web visitor and a phone through LiveKit SIP. Egress
(a recorder) and ingress are participants but not callers."""
INTENTIONAL = frozenset(
    {
        "CLIENT_INITIATED",
        "SERVER_SHUTDOWN",
        "DUPLICATE_IDENTITY",
        "MIGRATION",
        "PARTICIPANT_REMOVED",
        "ROOM_DELETED",
        "ROOM_CLOSED",
    }
)
"""Ways a participant leaves on purpose: LiveKit's own ``IsIntentionalDisconnect``
(``LK:pkg/rtc/types/interfaces.go``; ``shared/reference/livekit-protocol.md`` §3). Any other way
an agent leaves (``CONNECTION_TIMEOUT``, ``SIGNAL_CLOSE``, ``JOIN_FAILURE``, ``MEDIA_FAILURE``,
none said) is its worker lost."""
LogState = Literal["open", "ended", "sealed", "unknown"]
"""Where a call stands on call-log (``unknown``: the log never heard of it)."""


class Rules(msgspec.Struct, frozen=True, kw_only=True):
    """The numbers the rules count by; the seed's by default (settings shorten them in tests)."""

    heard_s: float = HEARD_S
    reoffer_s: float = REOFFER_S
    most_offers: int = MOST_OFFERS
    fleet_wait_s: float = FLEET_WAIT_S
    not_ready_s: float = NOT_READY_S


SEED = Rules()


class Room(msgspec.Struct, frozen=True, kw_only=True):
    """A room kept in offers: when the caller arrived (Unix seconds), the workers offered it so
    far (oldest first) and when the last offer was made."""

    name: str
    arrived_at: float
    tried: tuple[str, ...] = ()
    offered_at: float | None = None
    job: Literal["answer", "sentence"] = "answer"
    """``sentence``: the room of a worker that died; ``tried[0]`` is that worker (it opened the
    call), the rest are the workers offered the sentence; ``offered_at`` is None until then."""
    unheld: bool = False
    """The worker of its last offer is one LiveKit does not hold now (its heartbeat says so):
    that offer's job will never come, so the room is offered again now, not ``reoffer_s`` after
    the offer (issue 14, items 6 and 7: a worker whose link hung was offered callers for the 3 s it
    took to notice, and each waited the 12 s re-offer)."""


class Offer(msgspec.Struct, frozen=True, kw_only=True):
    worker: str
    seats_free: int
    heard_s: float
    attempt: int
    """Which offer of the room this is: 1 for the first (``JobOffer.attempt``)."""

    def journal(self, room: str) -> str:
        """The line the dispatcher's log says: who was offered and why."""
        return (
            f"room {room}: offered to {self.worker}: {counted(self.seats_free, 'seat')} free, "
            f"heard {self.heard_s:.0f} s ago (offer {self.attempt})"
        )


OverflowReason = Literal["three_offers", "no_seat", "nobody_heard"]
_WHY: dict[str, str] = {
    "three_offers": "offered {n} times and never opened",
    "no_seat": "no worker heard lately has a seat",
    "nobody_heard": "no worker of the fleet heard lately",
}


class Overflow(msgspec.Struct, frozen=True, kw_only=True):
    reason: OverflowReason

    def journal(self, room: str, overflow: str, offers: int) -> str:
        why = _WHY[self.reason].format(n=offers)
        return f"room {room}: to the overflow {overflow}: {why}"

    @property
    def waited(self) -> bool:
        """Whether the room waited for a worker (``no_seat`` is a full fleet, not a drop)."""
        return self.reason != "no_seat"


class Wait(msgspec.Struct, frozen=True, kw_only=True):
    until: float
    """When the room should be looked at again."""


Decision = Offer | Overflow | Wait
Admission = Literal["admit", "not_ready", "unheard", "cordoned", "fleet_full"]
""":func:`admission`'s verdicts: admit, or the reason of a refusal (the refusals' ``reason``)."""


def call_id_for(environment: str, dispatch_id: str) -> str:
    """The call id of a ring that carries none: the same for every delivery of its webhook."""
    digest = hashlib.sha256(f"{environment}:{dispatch_id}".encode()).hexdigest()
    return f"call_{digest[:20]}"


def agent_lost(reason: str | None) -> bool:
    """Whether an agent that left with ``reason`` lost its worker (not a goodbye)."""
    return reason not in INTENTIONAL


def not_counted(
    rows: Sequence[WorkerRow], offered: Mapping[str, int], held: Mapping[str, int]
) -> dict[str, int]:
    """Seats promised to each worker that its last heartbeat does not count yet:
    ``max(0, offered + held − active)`` (see the module's docstring)."""
    active = {r.worker: r.active for r in rows}
    out = {}
    for worker in set(offered) | set(held):
        missing = offered.get(worker, 0) + held.get(worker, 0) - active.get(worker, 0)
        if missing > 0:
            out[worker] = missing
    return out


def seats_free(row: WorkerRow, pending: Mapping[str, int]) -> int:
    """A worker's seats not held by a call nor promised to a room offered and not counted."""
    return row.seats - row.active - pending.get(row.worker, 0)


def candidates(
    rows: Sequence[WorkerRow],
    pending: Mapping[str, int],
    exclude: frozenset[str] = frozenset(),
    rules: Rules = SEED,
) -> list[WorkerRow]:
    """Workers that may be offered a call now, the most seats free first (then by name)."""
    eligible = [
        r
        for r in rows
        if r.state == "accepting"
        and r.agent_name is not None
        and r.last_heard_s < rules.heard_s
        and r.worker not in exclude
        and seats_free(r, pending) > 0
    ]
    return sorted(eligible, key=lambda r: (-seats_free(r, pending), r.worker))


def decide(
    room: Room,
    rows: Sequence[WorkerRow],
    pending: Mapping[str, int],
    now: float,
    rules: Rules = SEED,
) -> Decision:
    """What to do with ``room`` at ``now``, given the fleet's rows and the seats not counted.

    A worker offered this room before is not offered it again (it declined or never answered).
    """
    if room.job == "sentence":
        return _decide_sentence(room, rows, pending, now, rules)
    if room.tried:
        last_at = room.offered_at if room.offered_at is not None else room.arrived_at
        if now - last_at < rules.reoffer_s and not room.unheld:
            return Wait(until=last_at + rules.reoffer_s)
        if len(room.tried) >= rules.most_offers:
            return Overflow(reason="three_offers")
    if not any(r.last_heard_s < rules.heard_s for r in rows):
        if now - room.arrived_at < rules.fleet_wait_s:
            return Wait(until=room.arrived_at + rules.fleet_wait_s)
        return Overflow(reason="nobody_heard")
    return _to_the_best(room, rows, pending, rules)


def _to_the_best(
    room: Room, rows: Sequence[WorkerRow], pending: Mapping[str, int], rules: Rules
) -> Offer | Overflow:
    """The offer of ``room`` to the worker with the most seats free it was not offered before;
    the overflow when none has a seat."""
    chosen = candidates(rows, pending, frozenset(room.tried), rules)
    if not chosen:
        return Overflow(reason="no_seat")
    best = chosen[0]
    return Offer(
        worker=best.worker,
        seats_free=seats_free(best, pending),
        heard_s=best.last_heard_s,
        attempt=len(room.tried) + 1,
    )


def _decide_sentence(
    room: Room,
    rows: Sequence[WorkerRow],
    pending: Mapping[str, int],
    now: float,
    rules: Rules,
) -> Decision:
    """A dead worker's room (see the module's docstring): offers count from the lost worker on."""
    if room.offered_at is not None and now - room.offered_at < rules.reoffer_s and not room.unheld:
        return Wait(until=room.offered_at + rules.reoffer_s)
    if len(room.tried) - 1 >= rules.most_offers:
        return Overflow(reason="three_offers")
    lost = room.tried[:1]
    if not any(r.last_heard_s < rules.heard_s and r.worker not in lost for r in rows):
        return Wait(until=now)  # not full: looked at again by every sweep, however long
    return _to_the_best(room, rows, pending, rules)


def sentence_due(job: str, state: LogState | None, outcome: str | None, caller_here: bool) -> bool:
    """Whether the room of a lost agent gets the sentence: its caller is still in it and its
    call not over (seed 000: "a worker killed, a machine gone or a job's process dead").

    Open on call-log, or a log that did not answer (``state`` None: the caller is there, so
    yes). Ended and not sealed by its worker when its job's process died (``failed``) or past
    its drain (``drained``): the worker's main process ends such a call and leaves it unsealed
    for this. A sentence room whose own sentence job was lost: its call ended drained at the
    first loss. Not a call that ended on purpose (``completed``, ``caller_hangup``), nor a
    sealed one, nor one the log never heard of."""
    if not caller_here:
        return False
    if state is None or state == "open":
        return True
    return state == "ended" and (job == "sentence" or outcome in ("failed", "drained"))


def calls_back(caller: str, number: str | None) -> bool:
    """Whether a lost call gets a call back: a phone caller (LiveKit SIP) whose number is known;
    a web visitor gets none."""
    return caller == "sip" and bool(number)


def sweep(
    rooms: Sequence[Room],
    rows: Sequence[WorkerRow],
    pending: Mapping[str, int],
    now: float,
    rules: Rules = SEED,
) -> list[tuple[Room, Decision]]:
    """Decide every room of one fleet in arrival order; each offer made counts as pending for
    the rooms after it, so one sweep never promises a worker more seats than it has."""
    promised = dict(pending)
    out = []
    for room in sorted(rooms, key=lambda r: r.arrived_at):
        decision = decide(room, rows, promised, now, rules)
        if isinstance(decision, Offer):
            promised[decision.worker] = promised.get(decision.worker, 0) + 1
        out.append((room, decision))
    return out


def admission(
    rows: Sequence[WorkerRow], pending: Mapping[str, int], rules: Rules = SEED
) -> Admission:
    """Whether a new call of the fleet may be admitted at the token endpoint (seed 003), or why
    not: ``not_ready`` (nobody heard in ``not_ready_s``), ``unheard`` (nobody in ``heard_s``),
    ``cordoned`` (all heard lately are cordoned or draining), else ``fleet_full``."""
    if not any(r.last_heard_s < rules.not_ready_s for r in rows):
        return "not_ready"
    if candidates(rows, pending, rules=rules):
        return "admit"
    heard = [r for r in rows if r.last_heard_s < rules.heard_s]
    if not heard:
        return "unheard"
    if all(r.cordoned or r.state in ("cordoned", "draining") for r in heard):
        return "cordoned"
    return "fleet_full"
