"""A room's life from LiveKit's webhooks and call-log's events: the SQL of each transition.

Every transition is one conditional update that names the states it leaves, so a webhook
delivered twice, late or out of order changes nothing the second time: the row decides. Each
ending or opening is a journal line, written by the same statement. So a transition is one
statement committed by itself (autocommit, on psycopg's own connection): one round trip, not
three; one that commits after its replica died (it waited on a row's lock) is the change the
event's redelivery would have made, which then changes nothing.
"""

from __future__ import annotations

import datetime as dt
import functools
from typing import Any

import sqlalchemy as sa
from psycopg.rows import dict_row
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncEngine

from pinecall_dispatcher.store.rows import Arrival, RoomRow, columns, journal
from pinecall_dispatcher.store.tables import JOURNAL, REFUSALS, ROOMS
from pinecall_servicekit import db


@functools.cache
def _transition(where: str, changes: str) -> str:
    """One transition's SQL, for psycopg (``%(name)s`` placeholders): the rows ``where`` says
    are set ``changes`` and returned, and a journal line written for each in the same statement,
    ``%(line)s`` with its ``{call}`` and ``{worker}`` filled in (as ``str.format`` would: a
    worker of None is ``None``), dated ``%(now)s``. One statement on psycopg itself, where
    SQLAlchemy ran two, each through its own statement execution, between a BEGIN and a COMMIT
    (issue 20's profile of the dispatcher under ``bench/ring_to_offer.py``). Built once for each
    pair."""
    return f"""
    WITH changed AS (
        UPDATE {ROOMS.fullname} SET {changes} WHERE {where} RETURNING {columns()}
    ), journaled AS (
        INSERT INTO {JOURNAL.fullname} (call, room, fleet, at, line)
        SELECT call, room, fleet, %(now)s, replace(
            replace(%(line)s::text, '{{call}}', call), '{{worker}}', coalesce(worker, 'None')
        ) FROM changed
    )
    SELECT {columns()} FROM changed
    """


_INSTANCE = (
    "environment = %(environment)s AND room = %(room)s AND "
    "(%(room_sid)s::text IS NULL OR room_sid = %(room_sid)s OR room_sid IS NULL)"
)
"""The rows of one room instance: a room name LiveKit reuses later has another sid (none given:
every instance of the name). Its parameters: :func:`_of_instance`."""


def _of_instance(environment: str, room: str, room_sid: str | None) -> dict[str, Any]:
    """:data:`_INSTANCE`'s parameters; an empty sid is none (every instance of the name)."""
    return {"environment": environment, "room": room, "room_sid": room_sid or None}


_HAD = (
    "worker = %(worker)s AND (state = 'opened' OR "
    "(state = 'ended' AND outcome IN ('failed', 'drained')))"
)
"""Rows whose agent was ``worker``'s: opened by it, or ended by ``call.ended`` as a worker ends
the call of a job whose process died (``failed``) or held past its drain (``drained``), before
LiveKit says the agent gone."""

_ENDED = "state = 'ended', ended_at = %(now)s, outcome = %(outcome)s"


class RoomStore:
    """The rooms' transitions in Postgres."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self._autocommit = db.autocommit(engine)
        """The same pool, each statement its own transaction: a transition is one statement."""

    async def get(self, call: str) -> RoomRow | None:
        async with db.translate_errors("reading a room"), self.engine.connect() as conn:
            row = (await conn.execute(sa.select(ROOMS).where(ROOMS.c.call == call))).first()
        return RoomRow.of(row) if row else None

    async def of_room(self, environment: str, room: str) -> list[RoomRow]:
        """Every call placed in a room of that name, the newest first."""
        async with db.translate_errors("reading a room"), self.engine.connect() as conn:
            rows = (
                await conn.execute(
                    sa.select(ROOMS)
                    .where(ROOMS.c.environment == environment, ROOMS.c.room == room)
                    .order_by(ROOMS.c.created_at.desc())
                )
            ).all()
        return [RoomRow.of(r) for r in rows]

    async def admitted(self, environment: str, room: str) -> RoomRow | None:
        """The call a visitor's token was minted for in ``room``, while its visitor has not
        arrived (state ``admitted``), or None."""
        async with db.translate_errors("reading a room"), self.engine.connect() as conn:
            row = (
                await conn.execute(
                    sa.select(ROOMS).where(
                        ROOMS.c.environment == environment,
                        ROOMS.c.room == room,
                        ROOMS.c.state == "admitted",
                    )
                )
            ).first()
        return RoomRow.of(row) if row else None

    async def _update(
        self, where: str, changes: str, params: dict[str, Any], line: str, now: dt.datetime
    ) -> list[RoomRow]:
        """Set ``changes`` on the rows ``where`` says and journal ``line`` for each
        (:func:`_transition`), in one statement; the rows as they are now."""
        async with (
            db.translate_errors("updating a room"),
            db.driver_connection(self._autocommit) as pg,
            pg.cursor(row_factory=dict_row) as cursor,
        ):
            await cursor.execute(_transition(where, changes), {**params, "now": now, "line": line})
            return [RoomRow(**r) for r in await cursor.fetchall()]

    async def refused(
        self, now: dt.datetime, arrival: Arrival, reason: str, line: str
    ) -> RoomRow | None:
        """A ring refused before any offer (``unknown_agent``): its call is kept ``ended`` with
        ``reason`` as its outcome (a new row, or the ``admitted`` row of a visitor's token), one
        journal ``line`` and one refusal counted, in one transaction. None when the call was
        known already (a duplicate event, or a ring placed before): nothing is written."""
        stmt = insert(ROOMS).values(
            call=arrival.call,
            environment=arrival.environment,
            fleet=arrival.fleet,
            room=arrival.room,
            room_sid=arrival.room_sid,
            ring=arrival.ring,
            agent=arrival.agent,
            org=arrival.org,
            caller=arrival.caller,
            caller_identity=arrival.caller_identity,
            number=arrival.number,
            state="ended",
            outcome=reason,
            context=arrival.context,
            config=arrival.config,
            arrived_at=now,
            ended_at=now,
        )
        kept = ("room_sid", "ring", "caller_identity", "number", "arrived_at")
        upsert = stmt.on_conflict_do_update(
            index_elements=[ROOMS.c.call],
            set_={k: stmt.excluded[k] for k in (*kept, "state", "outcome", "ended_at")},
            where=sa.and_(
                ROOMS.c.state == "admitted", ROOMS.c.environment == stmt.excluded.environment
            ),
        ).returning(ROOMS)
        async with db.translate_errors("refusing a ring"), self.engine.begin() as conn:
            row = (await conn.execute(upsert)).first()
            if row is None:
                return None
            refused = RoomRow.of(row)
            await journal(conn, [(refused, line.format(call=refused.call), now)])
            await conn.execute(
                sa.insert(REFUSALS).values(
                    at=now,
                    environment=refused.environment,
                    fleet=refused.fleet,
                    agent=refused.agent,
                    org=refused.org,
                    reason=reason,
                )
            )
        return refused

    async def opened(
        self,
        now: dt.datetime,
        worker: str,
        *,
        call: str | None = None,
        environment: str = "",
        room: str = "",
        room_sid: str | None = None,
    ) -> list[RoomRow]:
        """A worker opened the call (``call.opened``), or an agent joined the room: the room's
        offers end and it holds a seat on ``worker``."""
        where, params = (
            ("call = %(call)s", {"call": call})
            if call
            else (_INSTANCE, _of_instance(environment, room, room_sid))
        )
        return await self._update(
            f"{where} AND state IN ('waiting', 'overflow')",
            "state = 'opened', worker = %(worker)s, opened_at = %(now)s",
            {**params, "worker": worker},
            "room {call}: opened by {worker}",
            now,
        )

    async def caller_left(
        self, now: dt.datetime, environment: str, room: str, room_sid: str | None, identity: str
    ) -> list[RoomRow]:
        """The caller hung up before any worker opened the call: no further offer."""
        return await self._update(
            f"{_INSTANCE} AND caller_identity = %(identity)s AND state IN ('waiting', 'overflow')",
            _ENDED,
            _of_instance(environment, room, room_sid)
            | {"identity": identity, "outcome": "caller_hangup"},
            "room {call}: the caller hung up before a worker opened the call",
            now,
        )

    async def of_worker(
        self, environment: str, room: str, room_sid: str | None, worker: str
    ) -> list[RoomRow]:
        """The rows of the room instance whose agent was ``worker``'s (:data:`_HAD`)."""
        async with (
            db.translate_errors("reading a room"),
            db.driver_connection(self._autocommit) as pg,
            pg.cursor(row_factory=dict_row) as cursor,
        ):
            await cursor.execute(
                f"SELECT {columns()} FROM {ROOMS.fullname} WHERE {_INSTANCE} AND {_HAD}",
                _of_instance(environment, room, room_sid) | {"worker": worker},
            )
            return [RoomRow(**r) for r in await cursor.fetchall()]

    async def lost(
        self, now: dt.datetime, call: str, worker: str, written: int | None, line: str
    ) -> RoomRow | None:
        """The agent of ``worker`` was lost with the call not over and its caller there (issue
        8): the room is kept in offers again as a ``sentence`` room following on from
        ``written``, ``tried`` starting with the lost worker, not offered yet. Taken by the
        update that finds the row still ``worker``'s (:data:`_HAD`): a duplicate or a second
        replica takes nothing."""
        rows = await self._update(
            f"call = %(call)s AND {_HAD}",
            # waited: a worker dropped it (seed 000: "a number that is not 0")
            "state = 'waiting', job = 'sentence', written = %(written)s, tried = %(tried)s, "
            "worker = NULL, dispatch = NULL, offered_at = NULL, outcome = NULL, waited = true",
            {"call": call, "worker": worker, "written": written, "tried": [worker]},
            line,
            now,
        )
        return rows[0] if rows else None

    async def note(self, row: RoomRow, line: str, now: dt.datetime) -> None:
        """Write ``line`` on the room's journal."""
        async with db.translate_errors("writing the journal"), self.engine.begin() as conn:
            await journal(conn, [(row, line, now)])

    async def agent_left(
        self, now: dt.datetime, environment: str, room: str, room_sid: str | None, worker: str
    ) -> list[RoomRow]:
        """The agent of ``worker`` left: its seat is free (a room whose agent was lost and got
        the sentence was taken by :meth:`lost` before this)."""
        return await self._update(
            f"{_INSTANCE} AND state = 'opened' AND worker = %(worker)s",
            _ENDED,
            _of_instance(environment, room, room_sid) | {"worker": worker, "outcome": "agent_left"},
            "room {call}: the agent of {worker} left",
            now,
        )

    async def finished(
        self, now: dt.datetime, environment: str, room: str, room_sid: str | None
    ) -> list[RoomRow]:
        """LiveKit closed the room: every live row of it ends."""
        return await self._update(
            f"{_INSTANCE} AND state IN ('waiting', 'overflow', 'opened')",
            _ENDED,
            _of_instance(environment, room, room_sid) | {"outcome": "room_finished"},
            "room {call}: the room ended",
            now,
        )

    async def ended(
        self, now: dt.datetime, call: str, outcome: str, *, sentence_too: bool = True
    ) -> list[RoomRow]:
        """The call ended on call-log (``call.ended``), or the room is gone. A ``sentence``
        room's call ended before its sentence, by design: ``call.ended`` passes
        ``sentence_too=False`` and the room lives on until its sentence job deletes it."""
        where = "call = %(call)s AND state <> 'ended'"
        if not sentence_too:
            where += " AND job <> 'sentence'"
        return await self._update(
            where,
            _ENDED,
            {"call": call, "outcome": outcome},
            f"room {{call}}: ended ({outcome})",
            now,
        )
