"""Outbound calls' SQL (issue 18): placed once per app-minted request id.

:meth:`OutboundStore.admit` writes, in one transaction under the org's quota lock
(:func:`.admissions.hold_quota`), the ``outbound`` row and the call's ``admitted`` room row (which
the offers then keep, as a visitor's). The ``outbound`` table's unique key on ``(environment,
org, request)`` decides a race of two retries: the loser writes nothing and answers the winner's
call, so one request id is one call and one room, dialled by one job.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from pinecall_dispatcher.store.admissions import hold_quota
from pinecall_dispatcher.store.rows import RoomRow, journal
from pinecall_dispatcher.store.tables import JOURNAL, OUTBOUND, ROOMS
from pinecall_servicekit import db


@dataclass(frozen=True, slots=True, kw_only=True)
class OutboundRow:
    """One ``dispatcher.outbound`` row."""

    call: str
    environment: str
    org: str
    request: str | None
    agent: str
    number: str
    context: dict[str, Any]
    fleet: str
    room: str
    sip_trunk: str
    placed_at: dt.datetime

    @classmethod
    def of(cls, row: sa.Row[Any]) -> OutboundRow:
        return cls(**row._mapping)


@dataclass(frozen=True, slots=True)
class Admitted:
    """What :meth:`OutboundStore.admit` did: the call's row, its room's row, and whether this
    request wrote them (False: a request of the same id had)."""

    outbound: OutboundRow
    room: RoomRow | None
    new: bool


class OutboundStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def find(self, environment: str, org: str, request: str) -> Admitted | None:
        """The call placed for ``request`` of ``org`` in ``environment``, and its room's row
        (None once pruned), or None."""
        async with db.translate_errors("reading an outbound call"), self.engine.connect() as conn:
            return await _find(conn, environment, org, request)

    async def admit(
        self,
        outbound: dict[str, Any],
        room: dict[str, Any],
        now: dt.datetime,
        max_call_seconds: float,
        written_held_s: float,
    ) -> Admitted:
        """Write the call's ``outbound`` row and its ``admitted`` room row if its org is under
        its quota (``TooManyRequests`` otherwise), or find the call an earlier request of the
        same id placed (not counted, never refused)."""
        environment, org, request = outbound["environment"], outbound["org"], outbound["request"]
        async with db.translate_errors("placing an outbound call"), self.engine.begin() as conn:
            if request is not None and (found := await _find(conn, environment, org, request)):
                return found
            await hold_quota(conn, org, environment, now, max_call_seconds, written_held_s)
            written = (
                await conn.execute(
                    insert(OUTBOUND)
                    .values(outbound | {"placed_at": now})
                    .on_conflict_do_nothing()
                    .returning(OUTBOUND)
                )
            ).first()
            if written is None:  # a request of the same id won the race meanwhile
                assert request is not None
                found = await _find(conn, environment, org, request)
                assert found is not None
                return found
            row = RoomRow.of(
                (await conn.execute(sa.insert(ROOMS).values(room).returning(ROOMS))).one()
            )
            await journal(conn, [(row, f"room {row.call}: outbound to {outbound['number']}", now)])
        return Admitted(OutboundRow.of(written), row, True)

    async def forget(self, call: str) -> None:
        """Take back a call whose room LiveKit did not make: nothing of it stays (its request
        may be sent again)."""
        async with db.translate_errors("taking back an outbound call"), self.engine.begin() as c:
            await c.execute(sa.delete(OUTBOUND).where(OUTBOUND.c.call == call))
            await c.execute(
                sa.delete(ROOMS).where(ROOMS.c.call == call, ROOMS.c.state == "admitted")
            )
            await c.execute(sa.delete(JOURNAL).where(JOURNAL.c.call == call))


async def _find(conn: AsyncConnection, environment: str, org: str, request: str) -> Admitted | None:
    found = (
        await conn.execute(
            sa.select(OUTBOUND).where(
                OUTBOUND.c.environment == environment,
                OUTBOUND.c.org == org,
                OUTBOUND.c.request == request,
            )
        )
    ).first()
    if found is None:
        return None
    room = (await conn.execute(sa.select(ROOMS).where(ROOMS.c.call == found.call))).first()
    return Admitted(OutboundRow.of(found), RoomRow.of(room) if room else None, False)
