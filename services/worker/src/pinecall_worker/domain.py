"""The worker's rules, as pure functions of plain values.

LiveKit reads a worker's load twice against one load threshold, 0.7: livekit-server offers a
job only to a worker under its ``agents.target_load``, and livekit-agents declines at its
``load_threshold`` (``livekit/agents/worker.py``, ``_default_load_threshold``). A counting worker
reports ``threshold × calls ÷ seats`` so the threshold falls on its last seat, and
``calls ÷ seats`` to the roster (full at 1.0). Neither threshold is overridden:
:func:`load_threshold` reads the installed framework's.
"""

from __future__ import annotations

import inspect
import math
from collections import deque
from collections.abc import Iterable

from pinecall_contracts.calls import EndCause
from pinecall_contracts.fleet import WorkerMinute

PLUGINS = frozenset(
    {
        "livekit.plugins.silero",
        "livekit.plugins.deepgram",
        "livekit.plugins.anthropic",
        "livekit.plugins.cartesia",
    }
)
"""The vendor plugins a call needs, loaded in the worker's own process before it takes one, so
the forkserver preloads them (seed 000: 3–5 s a call's process before, 0.1 s after)."""

MINUTE_S = 60.0
P95_MIN_TURNS = 5
"""Turns a minute needs before it states a first-audio p95 (seed 000)."""


OPEN_FIRST_S = 4.0
"""Seconds before its re-offer within which a job opens its call before it joins the room: an
open takes milliseconds on a quiet machine and seconds on a loaded one (stop 12's trial: jobs that
started 6–15 s after their offer, on 2 cores at a load of 20)."""


def opens_first(reoffer_at: float | None, now: float) -> bool:
    """Whether a job started at ``now`` (Unix seconds) must see its call open before it joins
    the room (``JobOffer.reoffer_at``, as Unix seconds, or None).

    A job that starts in good time joins at once and opens meanwhile (no caller waits on the
    log). One that starts within :data:`OPEN_FIRST_S` of its re-offer, or past it, may find the
    room offered to another worker or to the overflow; were it to join first, the caller would
    hear two agents until the log refused its open. It opens first, and leaves if refused.
    """
    return reoffer_at is not None and now >= reoffer_at - OPEN_FIRST_S


ROOM_GONE_REASONS = frozenset({"room disconnected", "the room went"})
"""A job's shutdown reasons that say its room went: livekit-agents' (``job_proc_lazy_main``, its
room's disconnection) and the stand-in watch's (``pinecall_worker.call.answer``)."""


def shutdown_cause(reason: str) -> EndCause:
    """Why an answer job shut down from outside ends its call ``drained``: ``room_gone`` when
    ``reason`` says its room went, else ``shutdown`` (the worker closing its jobs past the drain
    timeout and LiveKit's JobTermination both say livekit-agents' "parent process shutdown")."""
    return "room_gone" if reason in ROOM_GONE_REASONS else "shutdown"


def load_threshold() -> float:
    """The installed livekit-agents' production ``load_threshold`` (0.7 in 1.8.x)."""
    from livekit.agents import AgentServer

    default = inspect.signature(AgentServer.__init__).parameters["load_threshold"].default
    return float(default.prod_default)


def livekit_load(active: int, seats: int, threshold: float) -> float:
    """The load a counting worker reports to LiveKit: ``threshold × active ÷ seats``, where
    ``threshold`` is LiveKit's load threshold (:func:`load_threshold`).

    At ``active == seats`` it is exactly ``threshold``: LiveKit's full is the worker's last seat.
    """
    if seats < 1:
        raise ValueError("seats must be 1 or more")
    if active >= seats:
        return threshold  # exactly: ``0.7 × 3 ÷ 3`` is 0.6999999999999998 in floats, under it
    return threshold * active / seats


def effective_load(active: int, reserved: int, seats: int, threshold: float) -> float:
    """The load livekit-agents decides an offer by, for a counting worker: ``threshold ×
    (active + reserved) ÷ seats``, exactly ``threshold`` from the last seat on.

    The framework adds to the sampled load a guess per offer it accepted and has not launched
    (``reserved``): the load per running job, or, with none running, ``threshold ÷ warm processes``
    (``livekit/agents/worker.py``, ``_get_effective_load``). A counting worker knows a call's
    weight: one seat, ``threshold ÷ seats``. With the guess, a worker of 3 seats and 2 warm
    processes declined its third call while two offers waited for their process, and the
    dispatcher, which counts seats, waited 12 s for an open that never came (issue 14, item 6).
    """
    return livekit_load(active + reserved, seats, threshold)


def roster_load(active: int, seats: int) -> float:
    """The load a worker reports to the roster: ``active ÷ seats``, full at 1.0."""
    if seats < 1:
        raise ValueError("seats must be 1 or more")
    return active / seats


def default_seats(cpus: int) -> int:
    """``PINECALL_MAX_JOBS``' default: vCPU × 4 (seed 000: ~0.15–0.19 vCPU a call)."""
    return max(1, cpus * 4)


def idle_processes(seats: int, cpus: int) -> int:
    """Warm job processes to keep: livekit-agents' own default (one per vCPU), 2 at least, never
    more than the seats. An idle worker guesses a call's weight as its load threshold over its warm
    processes (``livekit/agents/worker.py``, ``_is_available``), so it accepts at most this many
    offers in one instant until the first call runs (seed 000, "Capacity is counted in calls")."""
    return max(1, min(seats, max(2, cpus)))


def not_ready(
    *, registered: bool, loaded: set[str], needed: frozenset[str], draining: bool
) -> list[str]:
    """Why the worker is not ready for a call (its startup probe); empty when it is."""
    missing = []
    if not registered:
        missing.append("not registered with LiveKit")
    if absent := sorted(needed - loaded):
        missing.append("plugins not loaded: " + ", ".join(absent))
    if draining:
        missing.append("draining")
    return missing


def p95(values: Iterable[float]) -> float:
    """The 95th percentile by nearest rank (``ceil(0.95 × n)``-th smallest)."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("no values")
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


class Minute:
    """The last minute of a worker's calls, fed with explicit times (Unix or monotonic seconds)."""

    def __init__(self, window_s: float = MINUTE_S) -> None:
        self.window_s = window_s
        self._ended: deque[tuple[float, bool]] = deque()
        self._errors: deque[float] = deque()
        self._turns: deque[tuple[float, float]] = deque()

    def turn(self, at: float, first_audio_s: float) -> None:
        self._turns.append((at, first_audio_s))

    def error(self, at: float) -> None:
        self._errors.append(at)

    def ended(self, at: float, failed: bool) -> None:
        self._ended.append((at, failed))

    def _forget(self, now: float) -> None:
        edge = now - self.window_s
        while self._ended and self._ended[0][0] < edge:
            self._ended.popleft()
        while self._errors and self._errors[0] < edge:
            self._errors.popleft()
        while self._turns and self._turns[0][0] < edge:
            self._turns.popleft()

    def read(self, now: float) -> WorkerMinute:
        """What the heartbeat says of the last ``window_s`` seconds before ``now``."""
        self._forget(now)
        turns = [s for _, s in self._turns]
        return WorkerMinute(
            ended=len(self._ended),
            failed=sum(1 for _, failed in self._ended if failed),
            errors=len(self._errors),
            turns=len(turns),
            first_audio_p95_s=round(p95(turns), 3) if len(turns) >= P95_MIN_TURNS else None,
        )
