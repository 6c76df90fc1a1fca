"""The calls not sealed yet, a page at a time, with when each log last moved (the reaper's read).

One statement: the unsealed calls of an environment in call-id order after a cursor (the partial
index ``ix_calls_unsealed``), each joined laterally to its newest entry by seq (the entries'
primary key), so a page costs one index range and one index probe per call, however long the logs.
"""

from __future__ import annotations

from collections.abc import Collection

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from pinecall_call_log import domain
from pinecall_call_log.store.tables import CALLS, ENTRIES
from pinecall_contracts.calls import CallPage, CallState, CallSummary
from pinecall_servicekit import db


class UnsealedCalls:
    """Reads of ``calllog.calls`` not sealed; driver errors become ``StoreUnavailable``."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def page(
        self, environment: str, states: Collection[CallState], after: str, limit: int
    ) -> CallPage:
        """Up to ``limit`` calls of ``environment`` in ``states`` (``open``, ``ended``) whose id
        sorts after ``after`` ("" for the first page); ``next`` is set when more may follow."""
        newest = (
            sa.select(ENTRIES.c.ts)
            .where(ENTRIES.c.call_id == CALLS.c.call_id)
            .order_by(ENTRIES.c.seq.desc())
            .limit(1)
            .lateral("newest")
        )
        query = (
            sa.select(CALLS, sa.func.coalesce(newest.c.ts, CALLS.c.opened_at).label("moved_at"))
            .select_from(CALLS.outerjoin(newest, sa.true()))
            .where(
                CALLS.c.environment == environment,
                CALLS.c.sealed_at.is_(None),
                CALLS.c.call_id > after,
            )
            .order_by(CALLS.c.call_id)
            .limit(limit)
        )
        if "open" not in states:
            query = query.where(CALLS.c.ended_at.is_not(None))
        if "ended" not in states:
            query = query.where(CALLS.c.ended_at.is_(None))
        async with db.translate_errors("listing calls"), self.engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        calls = [
            CallSummary(
                call=r.call_id,
                agent=r.agent,
                environment=r.environment,
                room=r.room,
                worker=r.worker,
                state=domain.state_of(r.ended_at is not None, False),
                outcome=r.outcome,
                cause=r.cause,
                opened_at=r.opened_at,
                ended_at=r.ended_at,
                last_entry_at=r.moved_at,
                written=r.written,
                last_seq=r.last_seq,
                channel=r.channel,
            )
            for r in rows
        ]
        more = len(calls) == limit
        return CallPage(
            environment=environment, calls=calls, next=calls[-1].call if more and calls else None
        )
