"""The roster as the dispatcher reads it: every fleet's rows and the fleets rows, over NATS
through the roster's client (:class:`pinecall_clients.roster.RosterClient`, the service key).

The rows come from the roster's ops service (``fleet.list``, any replica answers), at most
``max_age_s`` old when an offer is made (seed 000: "at most a second"): one request refreshes them
for every waiter (single flight). Each row's ``last_heard_s`` is aged by the time since the
snapshot, so a cached row never reads fresher than it is. When the roster does not answer, the
last rows are used, aging: past 12 s nobody reads as heard, and rooms wait, then overflow. The
fleets rows (each fleet's environment and LiveKit) come from ``fleet.records`` and are read again
every minute, or at once for a fleet not known yet.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable
from typing import TypeVar

import msgspec

from pinecall_clients.errors import RosterError
from pinecall_clients.roster import RosterClient
from pinecall_contracts.fleet import FleetRecord, FleetRecords, RosterSnapshot, WorkerRow

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

    async def _ask(self, what: str, asked: Awaitable[R]) -> R | None:
        """The roster's answer, or None (logged) when it did not answer or refused."""
        try:
            return await asked
        except RosterError as exc:
            _log.warning("%s not read from the roster: %s", what, exc)
            return None

    async def _read(self) -> None:
        snapshot = await self._ask("the workers' rows", self.roster.rows())
        if snapshot is not None:
            self._snapshot, self._read_at = snapshot, time.monotonic()

    async def refresh(self) -> None:
        """Read the rows now, whatever their age (a test that just heard a worker)."""
        await self._read()

    async def rows(self, fleet: str) -> list[WorkerRow]:
        """``fleet``'s workers, at most ``max_age_s`` old (or the last known, aged)."""
        if time.monotonic() - self._read_at > self.max_age_s:
            if self._refresh is None or self._refresh.done():
                self._refresh = asyncio.create_task(self._read())
            await asyncio.shield(self._refresh)
        if self._snapshot is None:
            return []
        age = time.monotonic() - self._read_at
        for view in self._snapshot.fleets:
            if view.fleet == fleet:
                return [
                    msgspec.structs.replace(r, last_heard_s=r.last_heard_s + age)
                    for r in view.workers
                ]
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
