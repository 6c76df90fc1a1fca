"""One replica's roster: every worker heard, by ``<fleet>/<worker>``, in memory.

Fed by the heartbeats this replica receives and by those the other replicas tell on NATS, so
every replica counts every worker; a replica that restarts has it back after one round (5 s).
Not thread-safe: used from one event loop.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping

from pinecall_contracts.fleet import FleetView, WorkerHeartbeat
from pinecall_contracts.ids import WorkerKey, parse_worker_name
from pinecall_roster import domain


class Roster:
    """Workers by ``<fleet>/<worker>``; the newest start of each name wins."""

    def __init__(
        self, *, silent_s: float = domain.SILENT_S, forgotten_s: float = domain.FORGOTTEN_S
    ) -> None:
        self.silent_s = silent_s
        self.forgotten_s = forgotten_s
        self._workers: dict[WorkerKey, domain.Heard] = {}

    def hear(self, heartbeat: WorkerHeartbeat, heard_at: float) -> bool:
        """Record ``heartbeat``; False when it is a dead registration's (an older start)."""
        key = parse_worker_name(heartbeat.worker).key
        old = self._workers.get(key)
        if old is not None and not domain.supersedes(heartbeat, old.heartbeat):
            return False
        if old is not None and old.heartbeat.worker == heartbeat.worker:
            heard_at = max(heard_at, old.heard_at)
        self._workers[key] = domain.Heard(heartbeat=heartbeat, heard_at=heard_at)
        return True

    def knows(self, key: WorkerKey) -> bool:
        """Whether a worker of ``key`` was heard and not forgotten (silent an hour)."""
        return key in self._workers

    def heard_as(self, key: WorkerKey) -> str | None:
        """The full name (``<fleet>/<worker>.<start>``) ``key`` is heard as now, the newest
        start; None when no worker of ``key`` was heard (or it was forgotten)."""
        heard = self._workers.get(key)
        return None if heard is None else heard.heartbeat.worker

    def forget_silent(self, now: float) -> int:
        """Drop workers silent for an hour; returns how many."""
        gone = [
            k
            for k, h in self._workers.items()
            if domain.is_forgotten(h.heard_at, now, self.forgotten_s)
        ]
        for key in gone:
            del self._workers[key]
        return len(gone)

    def fleets(self) -> set[str]:
        return {h.heartbeat.fleet for h in self._workers.values()}

    def standing(
        self, fleet: str, now: float, cordoned: Callable[[WorkerKey], bool]
    ) -> list[domain.Standing]:
        """The fleet's workers with their states, by name."""
        workers = sorted(
            ((k, h) for k, h in self._workers.items() if h.heartbeat.fleet == fleet),
            key=lambda kh: kh[0],
        )
        return domain.standings([(h, cordoned(k)) for k, h in workers], now, self.silent_s)

    def view(
        self,
        fleet: str,
        now: float,
        cordoned: Callable[[WorkerKey], bool],
        environments: Mapping[str, str] | None = None,
    ) -> FleetView:
        """The fleet as ``GET /v1/ops/fleet`` shows it."""
        standing = self.standing(fleet, now, cordoned)
        return FleetView(
            fleet=fleet,
            environment=(environments or {}).get(fleet),
            workers=[domain.row(p, now) for p in standing],
            totals=domain.totals(standing),
        )


def utc(ts: float) -> dt.datetime:
    """Unix seconds as an aware UTC datetime."""
    return dt.datetime.fromtimestamp(ts, dt.UTC)
