"""The roster as the dispatcher reads it: every fleet's rows and the fleets rows, over NATS
through the roster's client (:class:`pinecall_clients.roster.RosterClient`, the service key).

The rows come from the roster's ops service (``fleet.list``, any replica answers), at most
``max_age_s`` old when an offer is made (seed 000: "at most a second"): one request refreshes them
for every waiter (single flight). Each row's ``last_heard_s`` is aged by the time since the
snapshot, so a cached row never reads fresher than it is. When the roster does not answer, the
last rows are used, aging: past 12 s nobody reads as heard, and rooms wait, then overflow. The
fleets rows (each fleet's environment and LiveKit) come from ``fleet.records`` and are read again
every minute, or at once for a fleet not known yet.

Whether LiveKit holds a worker is also heard first-hand: every replica follows the heartbeats the
roster fans out on NATS (``fleet.heartbeat.*``), and a worker whose newest heartbeat came after
the snapshot was read is given that heartbeat's ``agent_name`` (None: LiveKit does not hold it).
A worker says a lost or regained registration at once (``pinecall_worker.link``), so a caller who
rings in the ``max_age_s`` after a worker's link to LiveKit is cut is not offered to it (issue 14,
item 7: 1 of 8 such callers waited the 12 s re-offer while the rows were a second old).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import msgspec

from pinecall_clients.errors import RosterError
from pinecall_clients.roster import RosterClient
from pinecall_contracts.fleet import (
    FleetRecord,
    FleetRecords,
    RosterSnapshot,
    WorkerHeartbeat,
    WorkerRow,
)
from pinecall_servicekit.bus import Bus
from pinecall_servicekit.changes import Changes

_log = logging.getLogger(__name__)
R = TypeVar("R", RosterSnapshot, FleetRecords)
RECORDS_TTL_S = 60.0
MISS_RETRY_S = 1.0
"""A fleet name not in the fleets rows is looked up again at most this often."""


class RosterView:
    """Fleet rows and fleets rows of the roster, read through ``roster`` (over NATS)."""

    def __init__(self, roster: RosterClient, *, max_age_s: float = 1.0) -> None:
        self.roster = roster
        self.max_age_s = max_age_s
        self._snapshot: RosterSnapshot | None = None
        self._read_at = 0.0
        self._refresh: asyncio.Task[None] | None = None
        self._records: dict[str, FleetRecord] = {}
        self._records_at = -RECORDS_TTL_S
        self._missed_at = -MISS_RETRY_S
        self._said: dict[str, tuple[float, WorkerHeartbeat]] = {}
        """Per worker, when its newest heartbeat was heard (monotonic), and that heartbeat."""
        self.said = Changes()
        """Notified at each heartbeat heard (what a test awaits instead of a sleep)."""
        self.on_unheld: Callable[[str], None] | None = None
        """Called with the fleet when a worker's heartbeat says LiveKit no longer holds it (the
        rooms offered to it are offered again at once: :attr:`domain.Room.unheld`)."""

    async def follow(self, bus: Bus) -> None:
        """Hear every heartbeat the roster fans out on ``bus`` from now on."""
        await bus.subscribe(bus.subjects.heartbeats, WorkerHeartbeat, self.heard)

    async def heard(self, heartbeat: WorkerHeartbeat) -> None:
        """A worker's heartbeat, as a roster replica received it."""
        was = self._agent_name(heartbeat.fleet, heartbeat.worker)
        self._said[heartbeat.worker] = (time.monotonic(), heartbeat)
        if was is not None and heartbeat.agent_name is None and self.on_unheld is not None:
            self.on_unheld(heartbeat.fleet)
        await self.said.notify()

    def _agent_name(self, fleet: str, worker: str) -> str | None:
        """``worker``'s registration as known before this heartbeat."""
        said = self._said.get(worker)
        if said is not None:
            return said[1].agent_name
        for view in self._snapshot.fleets if self._snapshot else ():
            if view.fleet == fleet:
                return next((r.agent_name for r in view.workers if r.worker == worker), None)
        return None

    def newest(self, worker: str) -> WorkerHeartbeat | None:
        """``worker``'s newest heartbeat heard since the rows were read, if any."""
        said = self._said.get(worker)
        return said[1] if said else None

    def _now(self, row: WorkerRow, age: float) -> WorkerRow:
        said = self._said.get(row.worker)
        if said and said[0] > self._read_at and said[1].agent_name != row.agent_name:
            row = msgspec.structs.replace(row, agent_name=said[1].agent_name)
        return msgspec.structs.replace(row, last_heard_s=row.last_heard_s + age)

    async def _ask(self, what: str, asked: Awaitable[R]) -> R | None:
        """The roster's answer, or None (logged) when it did not answer or refused."""
        try:
            return await asked
        except RosterError as exc:
            _log.warning("%s not read from the roster: %s", what, exc)
            return None

    async def _read(self) -> None:
        asked_at = time.monotonic()  # the rows are as of the ask, or later
        snapshot = await self._ask("the workers' rows", self.roster.rows())
        if snapshot is not None:
            self._snapshot, self._read_at = snapshot, asked_at
            # a heartbeat heard before the ask is in the rows: only newer ones are kept
            self._said = {w: said for w, said in self._said.items() if said[0] > asked_at}

    async def refresh(self) -> None:
        """Read the rows now, whatever their age (a test that just heard a worker)."""
        await self._read()

    async def rows(self, fleet: str) -> list[WorkerRow]:
        """``fleet``'s workers, at most ``max_age_s`` old (or the last known, aged), each with
        its registration as its newest heartbeat says."""
        if time.monotonic() - self._read_at > self.max_age_s:
            if self._refresh is None or self._refresh.done():
                self._refresh = asyncio.create_task(self._read())
            await asyncio.shield(self._refresh)
        if self._snapshot is None:
            return []
        age = time.monotonic() - self._read_at
        for view in self._snapshot.fleets:
            if view.fleet == fleet:
                return [self._now(r, age) for r in view.workers]
        return []

    async def fleets(self) -> dict[str, FleetRecord]:
        """The fleets rows by name (read again every minute)."""
        if time.monotonic() - self._records_at > RECORDS_TTL_S:
            await self._read_records()
        return self._records

    async def fleet(self, name: str) -> FleetRecord | None:
        """The fleets row of ``name``, or None when no row names it."""
        records = await self.fleets()
        if name not in records and time.monotonic() - self._missed_at > MISS_RETRY_S:
            self._missed_at = time.monotonic()
            await self._read_records()
        return self._records.get(name)

    async def fleet_of(self, environment: str) -> FleetRecord | None:
        """The fleet that serves ``environment`` (one fleet per environment)."""
        for record in (await self.fleets()).values():
            if record.environment == environment:
                return record
        return None

    async def _read_records(self) -> None:
        records = await self._ask("the fleets rows", self.roster.fleets())
        if records is not None:
            self._records = {r.name: r for r in records.fleets}
            self._records_at = time.monotonic()
