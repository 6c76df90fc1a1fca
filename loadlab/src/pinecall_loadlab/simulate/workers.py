"""Workers, their pods and nodes, as the simulator keeps them; and what the roster hears of them.

A :class:`Worker` is one pod's worker process: its seats, the calls it holds and is opening, whether
LiveKit holds it (registered), lists it though it is gone (a ghost), and whether it drains. Its
heartbeat every 5 s is a real :class:`~pinecall_contracts.fleet.WorkerHeartbeat`; what the
dispatcher and KEDA read is built from those by the roster's own rules
(:func:`pinecall_roster.domain.standings`, :func:`~pinecall_roster.domain.is_forgotten`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from livekit.protocol import agent

from pinecall_contracts.fleet import WorkerHeartbeat, WorkerRow
from pinecall_roster import domain as roster

START = 1_800_000_000
"""The Unix second the simulated day starts at: a worker's name carries its start (``.<start>``)."""
SCALED = "worker-scaled"
"""The scaled workers' host prefix (chart: ``worker-scaled-<world>-…``), KEDA's ``scaled=``."""


@dataclass(eq=False)
class Node:
    """A node of the worker pool: provisioning, up, or lost; holding at most one scaled pod."""

    ident: int
    state: str = "provisioning"
    worker: Worker | None = None
    empty_since: float = 0.0


@dataclass(eq=False)
class Worker:
    """One worker process (one pod). ``scaled``: on the worker pool, else on the core node."""

    name: str
    seats: int
    scaled: bool
    version: int = 0
    node: Node | None = None
    started: bool = False
    registered: bool = False
    """LiveKit holds it: it can be offered jobs."""
    gone: bool = False
    """Its process is over (exited, killed, vanished): no more heartbeats."""
    ghost_until: float = 0.0
    """A vanished worker stays listed by LiveKit until then (0: never listed as a ghost)."""
    terminating: bool = False
    """Told to stop: drains (or, not started yet, just goes)."""
    draining: bool = False
    evicted: bool = False
    """A lost node's pod, no longer counted by its Deployment."""
    active: int = 0
    opening: int = 0
    calls: set[int] = field(default_factory=set)
    lk_load: float = 0.0
    lk_status: int = agent.WorkerStatus.WS_AVAILABLE
    """LiveKit's view: the load and status of the worker's last status update."""

    @property
    def load(self) -> float:
        """What LiveKit's draw reads (:mod:`pinecall_loadlab.livekit.policy`)."""
        return self.lk_load

    @property
    def status(self) -> int:
        return self.lk_status

    def listed(self, now: float) -> bool:
        """LiveKit lists it: registered and alive, or a ghost not yet dropped."""
        return (self.registered and not self.gone) or self.ghost_until > now

    def heartbeat(self, fleet: str) -> WorkerHeartbeat:
        """The heartbeat the worker sends now (``load`` on the roster's scale, full at 1.0)."""
        return WorkerHeartbeat(
            fleet=fleet,
            worker=self.name,
            agent_name=self.name if self.registered else None,
            active=self.active,
            max_jobs=self.seats,
            load=self.active / self.seats,
            draining=self.draining,
        )


def worker_name(fleet: str, host: str, start_s: float) -> str:
    """``<fleet>/<host>.<start>``, the LiveKit agent name a worker registers under."""
    return f"{fleet}/{host}.{START + int(start_s)}"


class Roster:
    """What the roster replicas hear: each worker's newest heartbeat and when it was heard."""

    def __init__(self) -> None:
        self.heard: dict[str, roster.Heard] = {}
        self._rows: tuple[float, list[WorkerRow]] | None = None
        self._standings: tuple[float, list[roster.Standing]] | None = None

    def hear(self, heartbeat: WorkerHeartbeat, now: float) -> None:
        self.heard[heartbeat.worker] = roster.Heard(heartbeat=heartbeat, heard_at=now)
        self._rows = self._standings = None

    def standings(self, now: float) -> list[roster.Standing]:
        """The fleet's standings now (forgotten workers dropped), by the roster's rules."""
        if self._standings is None or self._standings[0] != now:
            for name in [n for n, h in self.heard.items() if roster.is_forgotten(h.heard_at, now)]:
                del self.heard[name]
            self._standings = (
                now,
                roster.standings([(h, False) for h in self.heard.values()], now),
            )
        return self._standings[1]

    def rows(self, now: float) -> list[WorkerRow]:
        """The rows the dispatcher reads (``GET /v1/ops/fleet``'s, as ``roster.py`` makes them)."""
        if self._rows is None or self._rows[0] != now:
            self._rows = (now, [roster.row(p, now) for p in self.standings(now)])
        return self._rows[1]


def seats_running(workers: Iterable[Worker]) -> tuple[int, int]:
    """``(seats, calls)`` of the workers that take calls now: registered, alive, not draining."""
    seats = calls = 0
    for w in workers:
        if w.registered and not w.gone and not w.draining:
            seats += w.seats
            calls += w.active
    return seats, calls
