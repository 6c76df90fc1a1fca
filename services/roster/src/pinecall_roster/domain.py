"""The roster's rules, as pure functions of plain values (``shared/CONVENTIONS.md`` habit 5).

Source: seed 000 — "The gateway hears every worker" (silent 30 s, forgotten 1 h, the newest start
replaces), "A worker that is up but bad" (failing, which never empties a fleet),
"Capacity is counted in calls" (full at ``active >= max_jobs``), "The burst" (wanted, absolute,
never asking twice for a pod still booting).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import msgspec

from pinecall_contracts.fleet import (
    CordonSetting,
    FleetTotals,
    WorkerHeartbeat,
    WorkerMinute,
    WorkerRow,
    WorkerState,
)
from pinecall_contracts.ids import parse_worker_name

SILENT_S = 30.0
"""Seconds without a heartbeat after which a worker is no longer capacity."""
HEARD_S = 12.0
"""The dispatcher's heard window (``shared/DESIGN.md``, "offer"): a worker heard within this many
seconds may be offered a call; past it, what its last heartbeat said of LiveKit is not now's."""
FLEET_WAIT_S = 12.0
"""The dispatcher's wait for a fleet nobody heard in :data:`HEARD_S`: a caller waits this long
from arrival, then goes to the overflow (``shared/DESIGN.md``, "offer")."""
FORGOTTEN_S = 3600.0
"""Seconds without a heartbeat after which a worker is forgotten."""
FAILING_MIN_ENDED = 4
"""Ended calls a minute needs before its error share can make a worker failing."""
FAILING_ERROR_SHARE = 0.5
"""Share of a minute's ended calls in error at which a worker is failing."""
FAILING_MIN_TURNS = 20
"""Measured turns a minute needs before its first-audio p95 can make a worker failing."""
FAILING_FIRST_AUDIO_P95_S = 5.0
"""First audio p95 (seconds) over which a worker is failing."""
START_SKEW_S = 300.0
"""How far in the future a worker's start may be (clocks of two machines), in seconds."""
LOAD_TOLERANCE = 0.01
"""How far a heartbeat's ``load`` may be from ``active ÷ max_jobs`` (rounding)."""
WANTED_TARGET = 0.6
"""Share of a scaled worker's seats its calls should fill (seed 000, "The shape of the numbers")."""


class Heard(msgspec.Struct, frozen=True, kw_only=True):
    """A worker's newest heartbeat and when this replica heard it (Unix seconds)."""

    heartbeat: WorkerHeartbeat
    heard_at: float


class Standing(msgspec.Struct, frozen=True, kw_only=True):
    """A worker's state as the roster counts it, with the facts it was read from."""

    heard: Heard
    state: WorkerState
    failing: bool
    cordoned: bool


def is_silent(heard_at: float, now: float, silent_s: float = SILENT_S) -> bool:
    """Not heard for ``silent_s`` seconds or more: no longer capacity."""
    return now - heard_at >= silent_s


def is_forgotten(heard_at: float, now: float, forgotten_s: float = FORGOTTEN_S) -> bool:
    """Not heard for ``forgotten_s`` seconds or more: dropped from the roster."""
    return now - heard_at >= forgotten_s


def is_full(heartbeat: WorkerHeartbeat) -> bool:
    """Every seat taken: ``active >= max_jobs``, or a load of 1.0 or more (calls ÷ seats)."""
    return heartbeat.active >= heartbeat.max_jobs or heartbeat.load >= 1.0


def is_failing(minute: WorkerMinute | None) -> bool:
    """Whether a worker's minute is failing: half or more of its ended calls in error (4 ended at
    least), or first audio p95 over 5 s (20 turns at least). No minute (an older release): never.
    """
    if minute is None:
        return False
    if minute.ended >= FAILING_MIN_ENDED and minute.failed >= FAILING_ERROR_SHARE * minute.ended:
        return True
    return (
        minute.turns >= FAILING_MIN_TURNS
        and minute.first_audio_p95_s is not None
        and minute.first_audio_p95_s > FAILING_FIRST_AUDIO_P95_S
    )


def heartbeat_problems(heartbeat: WorkerHeartbeat, now: float) -> list[str]:
    """What makes ``heartbeat`` not a worker's true word; empty when it is one.

    Its start must not be in the future (past :data:`START_SKEW_S`): a far-future start would
    hide every later registration of the name. It has a seat at least; its ``load`` is
    ``active ÷ max_jobs`` (the roster's scale); its minute has no more failed calls than ended.
    """
    problems = []
    parsed = parse_worker_name(heartbeat.worker)
    if parsed.start > now + START_SKEW_S:
        problems.append(f"the worker's start {parsed.start} is in the future")
    if heartbeat.max_jobs < 1:
        problems.append("max_jobs must be 1 or more")
    elif abs(heartbeat.load - heartbeat.active / heartbeat.max_jobs) > LOAD_TOLERANCE:
        problems.append(
            f"load {heartbeat.load} is not active ÷ max_jobs ({heartbeat.active}/{heartbeat.max_jobs})"
        )
    minute = heartbeat.minute
    if minute is not None and minute.failed > minute.ended:
        problems.append("the minute has more failed calls than ended ones")
    return problems


def supersedes(new: WorkerHeartbeat, old: WorkerHeartbeat) -> bool:
    """Whether ``new`` replaces ``old`` for the same ``<fleet>/<worker>``.

    A newer start is a new registration and replaces the older one (the dead process is never
    counted again); the same start is the same process's next heartbeat; an older start is a
    late heartbeat of a dead process and changes nothing.
    """
    return parse_worker_name(new.worker).start >= parse_worker_name(old.worker).start


def _base_state(heard: Heard, now: float, cordoned: bool, silent_s: float) -> WorkerState:
    if is_silent(heard.heard_at, now, silent_s):
        return "silent"
    if cordoned:
        return "cordoned"
    if heard.heartbeat.draining:
        return "draining"
    return "full" if is_full(heard.heartbeat) else "accepting"


def standings(
    workers: Sequence[tuple[Heard, bool]], now: float, silent_s: float = SILENT_S
) -> list[Standing]:
    """The state of each worker of one fleet, given ``(heard, cordoned)`` pairs.

    A worker whose minute is failing (:func:`is_failing`) reads ``failing`` (and stops counting)
    only while another worker of the fleet is accepting and not failing, so failing never empties
    a fleet.
    """
    base = [
        (h, c, _base_state(h, now, c, silent_s), is_failing(h.heartbeat.minute)) for h, c in workers
    ]
    healthy_accepting = sum(1 for _, _, s, f in base if s == "accepting" and not f)
    standing = []
    for heard, cordoned, state, failing in base:
        if failing and state in ("accepting", "full") and healthy_accepting > 0:
            state = "failing"
        standing.append(Standing(heard=heard, state=state, failing=failing, cordoned=cordoned))
    return standing


def totals(standing: Iterable[Standing]) -> FleetTotals:
    """A fleet's totals: workers accepting and full, their seats and free seats, and the calls
    of every worker not silent."""
    accepting = full = seats = free = calls = 0
    for p in standing:
        hb = p.heard.heartbeat
        if p.state != "silent":
            calls += hb.active
        if p.state == "accepting":
            accepting += 1
            seats += hb.max_jobs
            free += max(0, hb.max_jobs - hb.active)
        elif p.state == "full":
            full += 1
            seats += hb.max_jobs
    return FleetTotals(accepting=accepting, full=full, seats=seats, seats_free=free, calls=calls)


def fleet_is_full(fleet_totals: FleetTotals) -> bool:
    """No counted worker of the fleet has a seat free (a fleet nobody counts is full too)."""
    return fleet_totals.seats_free == 0


def is_scaled(worker: str, prefix: str) -> bool:
    """Whether ``worker`` (``<fleet>/<host>.<start>``) is a scaled worker of ``prefix``.

    The prefix is matched against the host (``worker-scaled-production``) or the whole name
    (``pinecall/worker-scaled``).
    """
    return worker.startswith(prefix) or parse_worker_name(worker).host.startswith(prefix)


def wanted_workers(
    standing: Iterable[Standing],
    *,
    prefix: str,
    seats: int,
    most: int | None,
    target: float = WANTED_TARGET,
) -> tuple[int, int, int]:
    """``(wanted, calls, seats heard)`` for the scaled workers whose name starts with ``prefix``.

    ``wanted`` is absolute: enough scaled workers of ``seats`` seats to hold their calls at
    ``target`` of their seats, plus the next call while the other (core) workers have no seat
    free; and while the whole fleet has no seat free, one more than the scaled workers heard.
    Counted from workers heard only, so a pod still booting (not yet heard) keeps the number where
    it is: it is never asked for twice. Never more than ``most``.
    """
    if seats < 1:
        raise ValueError("seats must be 1 or more")
    standing = list(standing)
    live = [p for p in standing if p.state != "silent"]
    scaled = [p for p in live if is_scaled(p.heard.heartbeat.worker, prefix)]
    core = [p for p in live if not is_scaled(p.heard.heartbeat.worker, prefix)]
    calls = sum(p.heard.heartbeat.active for p in scaled)
    seats_heard = sum(p.heard.heartbeat.max_jobs for p in scaled)
    next_call = 1 if fleet_is_full(totals(core)) else 0
    wanted = math.ceil((calls + next_call) / (target * seats))
    if fleet_is_full(totals(standing)):
        wanted = max(wanted, len(scaled) + 1)
    if most is not None:
        wanted = min(wanted, most)
    return wanted, calls, seats_heard


def newest_cordon(settings: Iterable[tuple[int, CordonSetting]]) -> CordonSetting | None:
    """The setting with the highest server revision: newest wins, never by a publisher's clock."""
    best: tuple[int, CordonSetting] | None = None
    for revision, setting in settings:
        if best is None or revision > best[0]:
            best = (revision, setting)
    return best[1] if best else None


def row(p: Standing, now: float) -> WorkerRow:
    """A worker's row as ``GET /v1/ops/fleet`` shows it and the dispatcher reads it, ``now``
    in seconds on the heartbeats' clock (``last_heard_s`` to the millisecond)."""
    hb = p.heard.heartbeat
    return WorkerRow(
        worker=hb.worker,
        agent_name=hb.agent_name,
        state=p.state,
        seats=hb.max_jobs,
        active=hb.active,
        load=hb.load,
        first_audio_p95_s=hb.minute.first_audio_p95_s if hb.minute else None,
        last_heard_s=round(max(0.0, now - p.heard.heard_at), 3),
        draining=hb.draining,
        cordoned=p.cordoned,
        failing=p.failing,
        load_per_core=hb.load_per_core,
        version=hb.version,
        minute=hb.minute,
        unregistered_s=(
            None
            if hb.unregistered_s is None
            else round(min(86_400.0, hb.unregistered_s + max(0.0, now - p.heard.heard_at)), 3)
        ),
    )
