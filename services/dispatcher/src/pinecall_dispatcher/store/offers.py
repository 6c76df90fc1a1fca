"""Offers in Postgres: decided and taken under the fleet's lock, each by the update that finds
the count of offers it read.

:meth:`OfferStore.fleet` opens one transaction holding ``pg_advisory_xact_lock`` of the fleet:
the rooms that arrived are kept, the seats promised to each worker read, the rooms decided and the
offers taken inside it, so two replicas never promise one seat twice and never offer one room
twice (the update's ``cardinality(tried) = n`` is the second guard, for any path that does not
take the lock). A batch of rooms shares one transaction: under a burst, rooms that arrived while
the last batch was decided are decided together. The dispatches are made after the commit;
:meth:`OfferStore.confirm` records their ids, one statement a batch, committed by itself (it
names the count of offers it records a dispatch of, so a late or repeated one changes nothing).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator, Collection, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import msgspec
import psycopg
from psycopg.rows import dict_row
from sqlalchemy.ext.asyncio import AsyncEngine

from pinecall_dispatcher.store.rows import Arrival, RoomRow, Taken, columns
from pinecall_dispatcher.store.tables import JOURNAL, ROOMS
from pinecall_servicekit import db

_JSON = msgspec.json.Encoder()
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


# Every statement of the fleet's transaction runs on psycopg itself, its SQL made here once
# (issue 20: SQLAlchemy's execution was a third of the dispatcher's CPU a ring under
# bench/ring_to_offer.py). Rows go in as one array a column (unnest), so a batch of any size is
# one prepared statement.

_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended(%(key)s, 0))"

_PROMISED = f"""
SELECT worker, state, count(*) FROM {ROOMS.fullname}
WHERE fleet = %(fleet)s AND worker IS NOT NULL
  AND (state = 'waiting' OR (state = 'opened' AND opened_at > %(since)s))
GROUP BY worker, state
"""

_ARRIVE = f"""
INSERT INTO {ROOMS.fullname} AS r (
    call, environment, fleet, room, room_sid, ring, agent, org, caller, caller_identity, number,
    context, config, arrived_at, state, tried, worker, offered_at, outcome, waited
)
SELECT call, environment, fleet, room, room_sid, ring, agent, org, caller, caller_identity,
       number, context::jsonb, config::jsonb, %(now)s, state,
       CASE WHEN tried IS NULL THEN '{{}}'::varchar[] ELSE ARRAY[tried] END,
       worker, offered_at, outcome, waited
FROM unnest(
    %(call)s::text[], %(environment)s::text[], %(fleet)s::text[], %(room)s::text[],
    %(room_sid)s::text[], %(ring)s::text[], %(agent)s::text[], %(org)s::text[],
    %(caller)s::text[], %(caller_identity)s::text[], %(number)s::text[], %(context)s::text[],
    %(config)s::text[], %(state)s::text[], %(tried)s::text[], %(worker)s::text[],
    %(offered_at)s::timestamptz[], %(outcome)s::text[], %(waited)s::bool[]
) AS a(call, environment, fleet, room, room_sid, ring, agent, org, caller, caller_identity,
       number, context, config, state, tried, worker, offered_at, outcome, waited)
ON CONFLICT (call) DO UPDATE SET
    {", ".join(f"{c} = excluded.{c}" for c in (*_ARRIVED, *_CLAIMED))}
WHERE r.state = 'admitted' AND r.environment = excluded.environment
RETURNING {columns("r")}
"""
"""The arrivals kept, each with its claim; an ``admitted`` row (a visitor's token) learns what
its visitor's arrival says. A call already known otherwise is left as it is (no row back)."""

_DUE = f"""
SELECT {columns()} FROM {ROOMS.fullname}
WHERE fleet = %(fleet)s AND state = 'waiting' AND (
    (cardinality(tried) = 0 AND arrived_at <= %(arrived_by)s)
    OR offered_at <= %(offered_by)s
    OR (offered_at IS NOT NULL AND worker = ANY(%(unheld)s::text[]))
    OR (job = 'sentence' AND offered_at IS NULL)
)
"""

_OFFER = f"""
UPDATE {ROOMS.fullname} AS r SET
    tried = array_append(r.tried, v.worker), worker = v.worker, offered_at = %(now)s,
    waited = r.waited OR cardinality(r.tried) > 0
FROM unnest(%(call)s::text[], %(n)s::int[], %(worker)s::text[]) AS v(call, n, worker)
WHERE r.call = v.call AND r.state = 'waiting' AND cardinality(r.tried) = v.n
RETURNING {columns("r")}
"""

_OVERFLOW = f"""
UPDATE {ROOMS.fullname} AS r SET
    state = 'overflow', worker = v.overflow, offered_at = %(now)s, outcome = v.reason,
    waited = r.waited OR v.waited OR cardinality(r.tried) > 0
FROM unnest(
    %(call)s::text[], %(n)s::int[], %(overflow)s::text[], %(reason)s::text[], %(waited)s::bool[]
) AS v(call, n, overflow, reason, waited)
WHERE r.call = v.call AND r.state = 'waiting' AND cardinality(r.tried) = v.n
RETURNING {columns("r")}
"""


async def promised(
    pg: psycopg.AsyncConnection[Any], fleet: str, now: dt.datetime, max_call_seconds: float
) -> tuple[dict[str, int], dict[str, int]]:
    """``(offered, held)`` per worker of ``fleet``: rooms offered to it and not opened, and calls
    it opened within ``max_call_seconds`` and did not end."""
    since = now - dt.timedelta(seconds=max_call_seconds)
    cursor = await pg.execute(_PROMISED, {"fleet": fleet, "since": since})
    offered: dict[str, int] = {}
    held: dict[str, int] = {}
    for worker, state, count in await cursor.fetchall():
        (offered if state == "waiting" else held)[worker] = count
    return offered, held


def _arrays(rows: Sequence[dict[str, Any]], names: Sequence[str]) -> dict[str, list[Any]]:
    """``rows`` as one list a column (``unnest``'s parameters)."""
    return {name: [row[name] for row in rows] for name in names}


class FleetOffers:
    """One fleet's offers inside its locked transaction (psycopg's connection ``pg``)."""

    def __init__(self, pg: psycopg.AsyncConnection[Any], fleet: str, now: dt.datetime) -> None:
        self.pg, self.fleet, self.now = pg, fleet, now

    async def _rows(self, sql: str, params: dict[str, Any]) -> list[RoomRow]:
        async with self.pg.cursor(row_factory=dict_row) as cursor:
            await cursor.execute(sql, params)
            return [RoomRow(**r) for r in await cursor.fetchall()]

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
                "context": _JSON.encode(a.context).decode(),
                "config": _JSON.encode(a.config).decode(),
            }
            | claim.columns(self.now)
            for a, claim in arrivals
        ]
        for row in rows:
            row["tried"] = row["tried"][0] if row["tried"] else None
        params = _arrays(rows, list(rows[0])) | {"now": self.now}
        claims = {a.call: claim for a, claim in arrivals}
        kept = await self._rows(_ARRIVE, params)
        return [
            Taken(row=r, line=claims[r.call].line, at=self.now) for r in kept if claims[r.call].line
        ]

    async def promised(self, max_call_seconds: float) -> tuple[dict[str, int], dict[str, int]]:
        """The fleet's seats promised, read under its lock (see :func:`promised`)."""
        return await promised(self.pg, self.fleet, self.now, max_call_seconds)

    async def due(
        self, grace_s: float, reoffer_s: float, unheld: Collection[str] = ()
    ) -> list[RoomRow]:
        """The fleet's rooms the sweep decides now: every waiting room never offered that
        arrived ``grace_s`` ago (its ring's own offer has had its chance) or offered ``reoffer_s``
        ago, or offered to a worker of ``unheld`` (LiveKit does not hold it: that offer's job
        never comes), and every dead worker's room whose sentence is not offered yet (it waits
        for a worker to be heard, looked at again by every sweep)."""
        return await self._rows(
            _DUE,
            {
                "fleet": self.fleet,
                "arrived_by": self.now - dt.timedelta(seconds=grace_s),
                "offered_by": self.now - dt.timedelta(seconds=reoffer_s),
                "unheld": list(unheld),
            },
        )

    async def offer(self, taken: Sequence[tuple[RoomRow, str, str]]) -> list[Taken]:
        """Take each ``(room, worker, journal line)`` offer whose room still holds the count it
        was read with; the offers taken."""
        if not taken:
            return []
        rows = await self._rows(
            _OFFER,
            {
                "call": [r.call for r, _, _ in taken],
                "n": [len(r.tried) for r, _, _ in taken],
                "worker": [worker for _, worker, _ in taken],
                "now": self.now,
            },
        )
        return self._taken(rows, {r.call: line for r, _, line in taken})

    async def overflow(self, taken: Sequence[tuple[RoomRow, str, str, bool, str]]) -> list[Taken]:
        """Give each ``(room, overflow, reason, waited, journal line)`` to the overflow if it
        still holds the count it was read with; the rooms taken."""
        if not taken:
            return []
        rows = await self._rows(
            _OVERFLOW,
            {
                "call": [t[0].call for t in taken],
                "n": [len(t[0].tried) for t in taken],
                "overflow": [t[1] for t in taken],
                "reason": [t[2] for t in taken],
                "waited": [t[3] for t in taken],
                "now": self.now,
            },
        )
        return self._taken(rows, {t[0].call: t[4] for t in taken})

    def _taken(self, rows: list[RoomRow], lines: dict[str, str]) -> list[Taken]:
        return [Taken(row=r, line=lines[r.call], at=self.now) for r in rows]


class OfferStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self._autocommit = db.autocommit(engine)
        """The same pool, each statement its own transaction: reads, and the confirmation."""

    @asynccontextmanager
    async def fleet(self, fleet: str, now: dt.datetime) -> AsyncIterator[FleetOffers]:
        """One transaction holding the fleet's lock."""
        async with db.translate_errors("offering"), db.driver_transaction(self.engine) as pg:
            await pg.execute(_LOCK, {"key": f"dispatcher:{fleet}"})
            yield FleetOffers(pg, fleet, now)

    async def promised(
        self, fleet: str, now: dt.datetime, max_call_seconds: float
    ) -> tuple[dict[str, int], dict[str, int]]:
        """The fleet's seats promised now, read without its lock (admission)."""
        async with (
            db.translate_errors("reading offers"),
            db.driver_connection(self._autocommit) as pg,
        ):
            return await promised(pg, fleet, now, max_call_seconds)

    async def fleets_waiting(self) -> list[str]:
        """The fleets with a room waiting (the sweep's work), read on psycopg as the placement's
        statements are: the sweep runs every tick on every replica."""
        async with (
            db.translate_errors("reading offers"),
            db.driver_connection(self._autocommit) as pg,
        ):
            cursor = await pg.execute(_FLEETS_WAITING)
            return [fleet for (fleet,) in await cursor.fetchall()]

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
            db.driver_connection(self._autocommit) as pg,
        ):
            cursor = await pg.execute(_CONFIRM, params)
            return {call: state for call, state in await cursor.fetchall()}


_FLEETS_WAITING = (
    f"SELECT DISTINCT fleet FROM {ROOMS.fullname} WHERE state = 'waiting' ORDER BY fleet"
)

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
