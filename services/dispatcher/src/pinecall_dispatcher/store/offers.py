"""Offers in Postgres: decided and taken under the fleet's lock, each by the update that finds
the count of offers it read.

:meth:`OfferStore.fleet` opens one transaction holding ``pg_advisory_xact_lock`` of the fleet:
the seats promised to each worker are read, the rooms decided and the offers taken inside it, so
two replicas never promise one seat twice and never offer one room twice (the update's
``cardinality(tried) = n`` is the second guard, for any path that does not take the lock). The
dispatch itself is made after the commit; :meth:`OfferStore.confirm` records its id.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from pinecall_dispatcher.store.rows import RoomRow, journal
from pinecall_dispatcher.store.tables import ROOMS
from pinecall_servicekit import db

_offers_made = sa.func.cardinality(ROOMS.c.tried)


async def promised(
    conn: AsyncConnection, fleet: str, now: dt.datetime, max_call_s: float
) -> tuple[dict[str, int], dict[str, int]]:
    """``(offered, held)`` per worker of ``fleet``: rooms offered to it and not opened, and calls
    it opened within ``max_call_s`` and did not end."""
    since = now - dt.timedelta(seconds=max_call_s)
    rows = (
        await conn.execute(
            sa.select(ROOMS.c.worker, ROOMS.c.state, sa.func.count())
            .where(
                ROOMS.c.fleet == fleet,
                ROOMS.c.worker.is_not(None),
                sa.or_(
                    ROOMS.c.state == "waiting",
                    sa.and_(ROOMS.c.state == "opened", ROOMS.c.opened_at > since),
                ),
            )
            .group_by(ROOMS.c.worker, ROOMS.c.state)
        )
    ).all()
    offered: dict[str, int] = {}
    held: dict[str, int] = {}
    for worker, state, count in rows:
        (offered if state == "waiting" else held)[worker] = count
    return offered, held


class FleetOffers:
    """One fleet's offers inside its locked transaction."""

    def __init__(self, conn: AsyncConnection, fleet: str, now: dt.datetime) -> None:
        self.conn, self.fleet, self.now = conn, fleet, now
        self.lines: list[tuple[RoomRow, str]] = []

    async def promised(self, max_call_s: float) -> tuple[dict[str, int], dict[str, int]]:
        """The fleet's seats promised, read under its lock (see :func:`promised`)."""
        return await promised(self.conn, self.fleet, self.now, max_call_s)

    async def due(self, grace_s: float, reoffer_s: float, call: str | None = None) -> list[RoomRow]:
        """The fleet's rooms to decide now: ``call`` alone when given (a ring just arrived), else
        every waiting room never offered that arrived ``grace_s`` ago (its ring's own offer has
        had its chance) or offered ``reoffer_s`` ago."""
        where = sa.and_(ROOMS.c.fleet == self.fleet, ROOMS.c.state == "waiting")
        if call is not None:
            where = sa.and_(where, ROOMS.c.call == call, _offers_made == 0)
        else:
            where = sa.and_(
                where,
                sa.or_(
                    sa.and_(
                        _offers_made == 0,
                        ROOMS.c.arrived_at <= self.now - dt.timedelta(seconds=grace_s),
                    ),
                    ROOMS.c.offered_at <= self.now - dt.timedelta(seconds=reoffer_s),
                ),
            )
        rows = (await self.conn.execute(sa.select(ROOMS).where(where))).all()
        return [RoomRow.of(r) for r in rows]

    async def offer(self, room: RoomRow, worker: str, line: str) -> RoomRow | None:
        """Take the offer of ``room`` to ``worker`` if it still holds the count it was read with."""
        row = (
            await self.conn.execute(
                sa.update(ROOMS)
                .where(
                    ROOMS.c.call == room.call,
                    ROOMS.c.state == "waiting",
                    _offers_made == len(room.tried),
                )
                .values(
                    tried=sa.func.array_append(ROOMS.c.tried, worker),
                    worker=worker,
                    offered_at=self.now,
                    waited=ROOMS.c.waited | (_offers_made > 0),
                )
                .returning(ROOMS)
            )
        ).first()
        return self._taken(row, line)

    async def overflow(
        self, room: RoomRow, overflow: str, reason: str, waited: bool, line: str
    ) -> RoomRow | None:
        """Give ``room`` to the overflow if it still holds the count it was read with."""
        row = (
            await self.conn.execute(
                sa.update(ROOMS)
                .where(
                    ROOMS.c.call == room.call,
                    ROOMS.c.state == "waiting",
                    _offers_made == len(room.tried),
                )
                .values(
                    state="overflow",
                    worker=overflow,
                    offered_at=self.now,
                    outcome=reason,
                    waited=ROOMS.c.waited | waited | (_offers_made > 0),
                )
                .returning(ROOMS)
            )
        ).first()
        return self._taken(row, line)

    def _taken(self, row: sa.Row[object] | None, line: str) -> RoomRow | None:
        if row is None:
            return None
        taken = RoomRow.of(row)
        self.lines.append((taken, line))
        return taken


class OfferStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    @asynccontextmanager
    async def fleet(self, fleet: str, now: dt.datetime) -> AsyncIterator[FleetOffers]:
        """One transaction holding the fleet's lock; the offers taken are journaled at commit."""
        async with db.translate_errors("offering"), self.engine.begin() as conn:
            await conn.execute(
                sa.select(
                    sa.func.pg_advisory_xact_lock(
                        sa.func.hashtextextended(f"dispatcher:{fleet}", 0)
                    )
                )
            )
            offers = FleetOffers(conn, fleet, now)
            yield offers
            await journal(conn, offers.lines, now)

    async def promised(
        self, fleet: str, now: dt.datetime, max_call_s: float
    ) -> tuple[dict[str, int], dict[str, int]]:
        """The fleet's seats promised now, read without its lock (admission)."""
        async with db.translate_errors("reading offers"), self.engine.connect() as conn:
            return await promised(conn, fleet, now, max_call_s)

    async def fleets_waiting(self) -> list[str]:
        """The fleets with a room waiting (the sweep's work)."""
        async with db.translate_errors("reading offers"), self.engine.connect() as conn:
            rows = (
                await conn.execute(
                    sa.select(ROOMS.c.fleet).where(ROOMS.c.state == "waiting").distinct()
                )
            ).all()
        return sorted(r.fleet for r in rows)

    async def confirm(self, call: str, offers: int, dispatch: str) -> RoomRow | None:
        """Record the dispatch of offer number ``offers`` (the overflow's counts as the last);
        the row as it stands, or None when a later offer replaced it."""
        async with db.translate_errors("recording a dispatch"), self.engine.begin() as conn:
            row = (
                await conn.execute(
                    sa.update(ROOMS)
                    .where(ROOMS.c.call == call, _offers_made == offers)
                    .values(dispatch=dispatch)
                    .returning(ROOMS)
                )
            ).first()
        return RoomRow.of(row) if row else None
