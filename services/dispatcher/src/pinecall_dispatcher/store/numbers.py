"""Phone numbers' SQL (issue 18): claim a number, record what LiveKit made for it, forget it.

A number is the table's key, so two puts of one number never both claim it: the first insert
wins and the other reads the holder. A claimed row has no ``trunk_id`` until LiveKit made the
trunk and the rule; a row left so (a replica that died midway) is made again by its org's next
put (:mod:`pinecall_dispatcher.numbers`). Puts of one number make its trunk and rule one at a
time (:meth:`NumberStore.making`): a put that found the row of another still making them took it
for a dead one's and made its own over it, leaving a rule of a deleted trunk (the probe's six
concurrent puts).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncEngine

from pinecall_dispatcher.store.tables import PHONE_NUMBERS
from pinecall_servicekit import db

Row = dict[str, Any]


class NumberStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    @contextlib.asynccontextmanager
    async def making(self, number: str) -> AsyncIterator[None]:
        """Hold ``number``'s lock while a put makes its trunk and rule: a transaction of its own
        holding ``pg_advisory_xact_lock`` (freed when it ends, or when a dead replica's
        connection drops)."""
        lock = sa.func.pg_advisory_xact_lock(sa.func.hashtextextended(f"number:{number}", 0))
        async with db.translate_errors("locking a phone number"), self.engine.begin() as conn:
            await conn.execute(sa.select(lock))
            yield

    async def claim(self, row: Row) -> tuple[Row, bool]:
        """Insert ``row`` (``number``, ``org``, ``environment``, ``agent``, ``fleet``,
        ``livekit_url``) unless the number is held: the row that stands, and whether this
        claimed it."""
        statement = (
            insert(PHONE_NUMBERS)
            .values(row)
            .on_conflict_do_nothing(index_elements=[PHONE_NUMBERS.c.number])
            .returning(*PHONE_NUMBERS.c)
        )
        async with db.translate_errors("claiming a phone number"), self.engine.begin() as conn:
            made = (await conn.execute(statement)).mappings().first()
            if made is not None:
                return dict(made), True
            held = await conn.execute(
                sa.select(PHONE_NUMBERS).where(PHONE_NUMBERS.c.number == row["number"])
            )
            return dict(held.mappings().one()), False

    async def made(self, number: str, trunk_id: str, rule_id: str) -> Row:
        """Record the trunk and rule LiveKit made for ``number``; the row as it stands."""
        statement = (
            sa.update(PHONE_NUMBERS)
            .where(PHONE_NUMBERS.c.number == number)
            .values(trunk_id=trunk_id, rule_id=rule_id)
            .returning(*PHONE_NUMBERS.c)
        )
        async with db.translate_errors("recording a phone number"), self.engine.begin() as conn:
            return dict((await conn.execute(statement)).mappings().one())

    async def get(self, number: str) -> Row | None:
        """``number``'s row, whoever holds it."""
        async with db.translate_errors("reading a phone number"), self.engine.connect() as conn:
            found = await conn.execute(
                sa.select(PHONE_NUMBERS).where(PHONE_NUMBERS.c.number == number)
            )
            row = found.mappings().first()
        return dict(row) if row is not None else None

    async def of(self, org: str, environment: str) -> list[Row]:
        """``org``'s numbers in ``environment`` that LiveKit holds, by number."""
        statement = (
            sa.select(PHONE_NUMBERS)
            .where(
                PHONE_NUMBERS.c.org == org,
                PHONE_NUMBERS.c.environment == environment,
                PHONE_NUMBERS.c.trunk_id.is_not(None),
            )
            .order_by(PHONE_NUMBERS.c.number)
        )
        async with db.translate_errors("listing phone numbers"), self.engine.connect() as conn:
            return [dict(r) for r in (await conn.execute(statement)).mappings()]

    async def forget(self, number: str) -> None:
        """Delete ``number``'s row (nothing if none)."""
        async with db.translate_errors("forgetting a phone number"), self.engine.begin() as conn:
            await conn.execute(sa.delete(PHONE_NUMBERS).where(PHONE_NUMBERS.c.number == number))
