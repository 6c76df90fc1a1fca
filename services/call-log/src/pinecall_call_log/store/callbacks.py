"""Call backs read for the dispatcher's follow-ups (issue 18, "Call backs, dialled").

Call-log writes a call back (:meth:`pinecall_call_log.store.agents.AgentStore.callback`); the
dispatcher makes each into a follow-up, reading them here oldest first from a time it keeps.
Rows are read by ``requested_at``, not by id: an id is taken before its transaction commits, so a
reader paging by id could pass one that commits later; the dispatcher reads again from a little
before the newest it has (its ``since``), and makes a follow-up once per id.
"""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from pinecall_call_log.store.tables import AGENT_VERSIONS, CALLBACKS, CALLS
from pinecall_contracts.calls import Callback, CallbackPage
from pinecall_servicekit import db


class CallbackStore:
    """The call backs, read."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def since(self, since: dt.datetime, limit: int) -> CallbackPage:
        """Call backs of every environment requested at or after ``since``, oldest first, at
        most ``limit``; each with its org: its call's, else the one org defining its agent in its
        environment, else empty."""
        defining = (
            sa.select(sa.func.min(AGENT_VERSIONS.c.org))
            .where(
                AGENT_VERSIONS.c.environment == CALLBACKS.c.environment,
                AGENT_VERSIONS.c.name == CALLBACKS.c.agent,
            )
            .having(sa.func.count(sa.distinct(AGENT_VERSIONS.c.org)) == 1)
            .scalar_subquery()
        )
        query = (
            sa.select(CALLBACKS, sa.func.coalesce(CALLS.c.org, defining, "").label("org"))
            .select_from(CALLBACKS.outerjoin(CALLS, CALLS.c.call_id == CALLBACKS.c.call_id))
            .where(CALLBACKS.c.requested_at >= since)
            .order_by(CALLBACKS.c.requested_at, CALLBACKS.c.id)
            .limit(limit)
        )
        async with db.translate_errors("reading call backs"), self.engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        callbacks = [
            Callback(
                id=r.id,
                environment=r.environment,
                agent=r.agent,
                org=r.org,
                call=r.call_id,
                number=r.number,
                contact=r.contact,
                reason=r.reason,
                seq=r.agent_seq,
                requested_at=r.requested_at,
            )
            for r in rows
        ]
        more = len(callbacks) == limit
        return CallbackPage(callbacks=callbacks, next=callbacks[-1].requested_at if more else None)
