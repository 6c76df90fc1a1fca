"""Offers in Postgres: decided and taken under the fleet's lock, each by the update that finds
the count of offers it read.

:meth:`OfferStore.fleet` opens one transaction holding ``pg_advisory_xact_lock`` of the fleet:
the rooms that arrived are kept, the seats promised to each worker read, the rooms decided and the
offers taken inside it, so two replicas never promise one seat twice and never offer one room
twice (the update's ``cardinality(tried) = n`` is the second guard, for any path that does not
take the lock). A batch of rooms shares one transaction: under a burst, rooms that arrived while
the last batch was decided are decided together. The dispatches are made after the commit;
:meth:`OfferStore.confirm` records their ids, one statement a batch.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator, Collection, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import ARRAY, insert
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from pinecall_dispatcher.store.rows import Arrival, RoomRow, Taken
from pinecall_dispatcher.store.tables import JOURNAL, ROOMS
from pinecall_servicekit import db

_offers_made = sa.func.cardinality(ROOMS.c.tried)
_ARRIVED = ("room", "room_sid", "ring", "caller_identity", "number", "arrived_at")
"""What an admitted row (a visitor's token) learns when its visitor arrives."""
_CLAIMED = ("state", "tried", "worker", "offered_at", "outcome", "waited")
"""What a room that just arrived is given at once: an offer, or the overflow."""


@dataclass(frozen=True, slots=True)
class Claim:
    """What a room that just arrived is given in the transaction that keeps it: an offer to
    ``worker``, or the overflow ``overflow`` for ``reason``, or nothing yet (it waits)."""

    line: str = ""
    worker: str | None = None
    overflow: str | None = None
    reason: str | None = None
    waited: bool = False

    def columns(self, now: dt.datetime) -> dict[str, Any]:
        if self.worker is not None:
            return {"state": "waiting", "tried": [self.worker], "worker": self.worker,
                    "offered_at": now, "outcome": None, "waited": False}  # fmt: skip
        if self.overflow is not None:
            return {"state": "overflow", "tried": [], "worker": self.overflow,
                    "offered_at": now, "outcome": self.reason, "waited": self.waited}  # fmt: skip
        return {"state": "waiting", "tried": [], "worker": None, "offered_at": None,
                "outcome": None, "waited": False}  # fmt: skip


async def promised(
    conn: AsyncConnection, fleet: str, now: dt.datetime, max_call_seconds: float
) -> tuple[dict[str, int], dict[str, int]]:
    """``(offered, held)`` per worker of ``fleet``: rooms offered to it and not opened, and calls
    it opened within ``max_call_seconds`` and did not end."""
    since = now - dt.timedelta(seconds=max_call_seconds)
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


def _values(alias: str, rows: Sequence[tuple[Any, ...]], **columns: Any) -> Any:
    """``unnest(:alias_c1, …) AS alias(c1, …)``: ``rows`` as one array parameter a column, to join
    an update with. Not a ``VALUES`` list: SQLAlchemy caches no statement holding one (its cache
    key is None), so each batch was compiled anew — 14.5 % of the dispatcher's CPU under
    ``bench/ring_to_offer.py`` (py-spy, issue 20); this one is compiled once."""
    names = list(columns)
    data = list(zip(*rows, strict=True)) if rows else [() for _ in names]
    arrays = (
        sa.bindparam(f"{alias}_{name}", list(values), type_=ARRAY(columns[name]))
        for name, values in zip(names, data, strict=True)
    )
    return (
        sa.func.unnest(*arrays)
        .table_valued(*(sa.column(name, columns[name]) for name in names))
        .render_derived(name=alias)
    )


class FleetOffers:
    """One fleet's offers inside its locked transaction."""

    def __init__(self, conn: AsyncConnection, fleet: str, now: dt.datetime) -> None:
        self.conn, self.fleet, self.now = conn, fleet, now

    async def arrive(self, arrivals: Sequence[tuple[Arrival, Claim]]) -> list[Taken]:
        """Keep each arrival in offers with what it is given at once (one statement): a new
        row, or an admitted one whose visitor arrived. The offers and overflows taken. A call
        already known (a duplicate) is left as it is: if it is still waiting unoffered (a replica
        stopped before offering it), the sweep offers it after its grace."""
        if not arrivals:
            return []
        rows = [
            {
                "call": a.call,
                "environment": a.environment,
                "fleet": a.fleet,
                "room": a.room,
                "room_sid": a.room_sid,
                "ring": a.ring,
                "agent": a.agent,
                "org": a.org,
                "caller": a.caller,
                "caller_identity": a.caller_identity,
                "number": a.number,
                "state": "waiting",
                "context": a.context,
                "config": a.config,
                "arrived_at": self.now,
            }
            | claim.columns(self.now)
            for a, claim in arrivals
        ]
        # The rows as parameters of one cached statement (SQLAlchemy's "insertmanyvalues": one
        # INSERT … VALUES … RETURNING a page of rows), not a multi-row .values() of its own,
        # which SQLAlchemy compiles anew each time (see _values).
        stmt = insert(ROOMS)
        upsert = stmt.on_conflict_do_update(
            index_elements=[ROOMS.c.call],
            set_={k: stmt.excluded[k] for k in (*_ARRIVED, *_CLAIMED)},
            where=sa.and_(
                ROOMS.c.state == "admitted", ROOMS.c.environment == stmt.excluded.environment
            ),
        ).returning(ROOMS)
        claims = {a.call: claim for a, claim in arrivals}
        kept = [RoomRow.of(r) for r in (await self.conn.execute(upsert, rows)).all()]
        return [
            Taken(row=r, line=claims[r.call].line, at=self.now) for r in kept if claims[r.call].line
        ]

    async def promised(self, max_call_seconds: float) -> tuple[dict[str, int], dict[str, int]]:
        """The fleet's seats promised, read under its lock (see :func:`promised`)."""
        return await promised(self.conn, self.fleet, self.now, max_call_seconds)

    async def due(
        self, grace_s: float, reoffer_s: float, unheld: Collection[str] = ()
    ) -> list[RoomRow]:
        """The fleet's rooms the sweep decides now: every waiting room never offered that
        arrived ``grace_s`` ago (its ring's own offer has had its chance) or offered ``reoffer_s``
        ago, or offered to a worker of ``unheld`` (LiveKit does not hold it: that offer's job
        never comes), and every dead worker's room whose sentence is not offered yet (it waits
        for a worker to be heard, looked at again by every sweep)."""
        where = sa.and_(
            ROOMS.c.fleet == self.fleet,
            ROOMS.c.state == "waiting",
            sa.or_(
                sa.and_(
                    _offers_made == 0,
                    ROOMS.c.arrived_at <= self.now - dt.timedelta(seconds=grace_s),
                ),
                ROOMS.c.offered_at <= self.now - dt.timedelta(seconds=reoffer_s),
                sa.and_(ROOMS.c.offered_at.is_not(None), ROOMS.c.worker.in_(list(unheld))),
                sa.and_(ROOMS.c.job == "sentence", ROOMS.c.offered_at.is_(None)),
            ),
        )
        rows = (await self.conn.execute(sa.select(ROOMS).where(where))).all()
        return [RoomRow.of(r) for r in rows]

    async def offer(self, taken: Sequence[tuple[RoomRow, str, str]]) -> list[Taken]:
        """Take each ``(room, worker, journal line)`` offer whose room still holds the count it
        was read with; the offers taken."""
        if not taken:
            return []
        v = _values(
            "offers",
            [(r.call, len(r.tried), worker) for r, worker, _ in taken],
            call=sa.String,
            n=sa.Integer,
            worker=sa.String,
        )
        stmt = (
            sa.update(ROOMS)
            .where(ROOMS.c.call == v.c.call, ROOMS.c.state == "waiting", _offers_made == v.c.n)
            .values(
                tried=sa.func.array_append(ROOMS.c.tried, v.c.worker),
                worker=v.c.worker,
                offered_at=self.now,
                waited=ROOMS.c.waited | (_offers_made > 0),
            )
            .returning(ROOMS)
        )
        return self._taken(await self.conn.execute(stmt), {r.call: line for r, _, line in taken})

    async def overflow(self, taken: Sequence[tuple[RoomRow, str, str, bool, str]]) -> list[Taken]:
        """Give each ``(room, overflow, reason, waited, journal line)`` to the overflow if it
        still holds the count it was read with; the rooms taken."""
        if not taken:
            return []
        v = _values(
            "overflows",
            [(r.call, len(r.tried), name, reason, waited) for r, name, reason, waited, _ in taken],
            call=sa.String,
            n=sa.Integer,
            overflow=sa.String,
            reason=sa.String,
            waited=sa.Boolean,
        )
        stmt = (
            sa.update(ROOMS)
            .where(ROOMS.c.call == v.c.call, ROOMS.c.state == "waiting", _offers_made == v.c.n)
            .values(
                state="overflow",
                worker=v.c.overflow,
                offered_at=self.now,
                outcome=v.c.reason,
                waited=ROOMS.c.waited | v.c.waited | (_offers_made > 0),
            )
            .returning(ROOMS)
        )
        return self._taken(await self.conn.execute(stmt), {t[0].call: t[4] for t in taken})

    def _taken(self, result: sa.CursorResult[Any], lines: dict[str, str]) -> list[Taken]:
        return [Taken(row=RoomRow.of(r), line=lines[r.call], at=self.now) for r in result.all()]


class OfferStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    @asynccontextmanager
    async def fleet(self, fleet: str, now: dt.datetime) -> AsyncIterator[FleetOffers]:
        """One transaction holding the fleet's lock."""
        lock = sa.func.pg_advisory_xact_lock(sa.func.hashtextextended(f"dispatcher:{fleet}", 0))
        async with db.translate_errors("offering"), self.engine.begin() as conn:
            await conn.execute(sa.select(lock))
            yield FleetOffers(conn, fleet, now)

    async def promised(
        self, fleet: str, now: dt.datetime, max_call_seconds: float
    ) -> tuple[dict[str, int], dict[str, int]]:
        """The fleet's seats promised now, read without its lock (admission)."""
        async with db.translate_errors("reading offers"), self.engine.connect() as conn:
            return await promised(conn, fleet, now, max_call_seconds)

    async def fleets_waiting(self) -> list[str]:
        """The fleets with a room waiting (the sweep's work)."""
        async with db.translate_errors("reading offers"), self.engine.connect() as conn:
            rows = (
                await conn.execute(
                    sa.select(ROOMS.c.fleet).where(ROOMS.c.state == "waiting").distinct()
                )
            ).all()
        return sorted(r.fleet for r in rows)

    async def confirm(
        self, made: Sequence[tuple[str, int, str]], lines: Sequence[tuple[Taken, str]]
    ) -> dict[str, str]:
        """Record each ``(call, offers, dispatch)`` (the dispatch of offer number ``offers``; the
        overflow's counts as the last) and write each ``(taken, line)`` on the journal, dated
        when it was decided. The state of each row that still holds its count; a call missing
        from the answer was offered again since."""
        params = {
            "calls": [call for call, _, _ in made],
            "counts": [n for _, n, _ in made],
            "dispatches": [dispatch for _, _, dispatch in made],
            "line_calls": [t.row.call for t, _ in lines],
            "line_rooms": [t.row.room for t, _ in lines],
            "line_fleets": [t.row.fleet for t, _ in lines],
            "line_ats": [t.at for t, _ in lines],
            "lines": [line for _, line in lines],
        }
        async with (
            db.translate_errors("recording dispatches"),
            db.driver_transaction(self.engine) as pg,
        ):
            cursor = await pg.execute(_CONFIRM, params)
            return {call: state for call, state in await cursor.fetchall()}


_CONFIRM = f"""
WITH confirmed AS (
    UPDATE {ROOMS.fullname} AS r SET dispatch = m.dispatch
    FROM unnest(%(calls)s::text[], %(counts)s::int[], %(dispatches)s::text[]) AS m(call, n, dispatch)
    WHERE r.call = m.call AND cardinality(r.tried) = m.n
    RETURNING r.call, r.state
), journaled AS (
    INSERT INTO {JOURNAL.fullname} (call, room, fleet, at, line)
    SELECT call, room, fleet, at, line FROM unnest(
        %(line_calls)s::text[], %(line_rooms)s::text[], %(line_fleets)s::text[],
        %(line_ats)s::timestamptz[], %(lines)s::text[]
    ) WITH ORDINALITY AS j(call, room, fleet, at, line, i) ORDER BY i
)
SELECT call, state FROM confirmed
"""
""":meth:`OfferStore.confirm`'s one statement, for psycopg: the dispatch ids recorded on the rows
that still hold their counts, and the journal lines written in their order."""
