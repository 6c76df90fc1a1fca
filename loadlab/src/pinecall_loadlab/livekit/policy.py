"""LiveKit's dispatch rules as pure functions of plain values.

- The node gate: psrpc's affinity RPC claims `JobRequest` with ``Σ max(0, f(load))`` over the key's
  `WS_AVAILABLE` workers; a sum ≤ 0 means "no servers available" and no offer at all
  (`LK:pkg/service/agentservice.go:L449-465`; formulas by version in the reference §2.4).
- The draw: one worker, weight ``max(0, 1 − load)``, among `WS_AVAILABLE` workers not yet tried
  for this job (`LK:pkg/service/agentservice.go:L531-560`).
"""

from __future__ import annotations

import enum
import random
from collections.abc import Iterable, Set
from typing import Protocol, TypeVar

from livekit.protocol import agent


class AffinityFormula(enum.Enum):
    """Which server version's node gate to model."""

    TARGET_LOAD = "target_load"
    """≥ v1.11.0: ``max(0, target_load − load)`` (target_load from `agents.target_load`, 0.7)."""
    ONE_MINUS_LOAD = "one_minus_load"
    """v1.9.0 – v1.10.x: ``max(0, 1 − load)``."""
    LEGACY_065 = "legacy_0.65"
    """≤ v1.8.x: ``max(0, 0.65 − load)``."""


class Candidate(Protocol):
    """What the rules read of a worker: its last reported status and load."""

    @property
    def status(self) -> int: ...

    @property
    def load(self) -> float: ...


def node_affinity(
    workers: Iterable[Candidate], formula: AffinityFormula, target_load: float = 0.7
) -> float:
    """The node's claim on a job: Σ over `WS_AVAILABLE` workers of the formula's headroom (≥ 0)."""
    threshold = {
        AffinityFormula.TARGET_LOAD: target_load,
        AffinityFormula.ONE_MINUS_LOAD: 1.0,
        AffinityFormula.LEGACY_065: 0.65,
    }[formula]
    return sum(
        max(0.0, threshold - w.load) for w in workers if w.status == agent.WorkerStatus.WS_AVAILABLE
    )


W = TypeVar("W", bound=Candidate)


def select_worker(workers: Iterable[W], attempted: Set[W], rng: random.Random) -> W | None:
    """One worker drawn with weight ``max(0, 1 − load)`` among available, untried ones; None when
    the weights sum to 0 ("no workers with sufficient capacity")."""
    pool = [
        (w, max(0.0, 1.0 - w.load))
        for w in workers
        if w not in attempted and w.status == agent.WorkerStatus.WS_AVAILABLE
    ]
    total = sum(weight for _, weight in pool)
    if total <= 0:
        return None
    r = rng.random() * total
    for w, weight in pool:
        r -= weight
        if r <= 0:
            return w
    return pool[-1][0]  # float rounding; LiveKit falls back to workers[0]
