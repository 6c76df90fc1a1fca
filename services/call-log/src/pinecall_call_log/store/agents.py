"""The agent log and callbacks (the only SQL of them); tool calls are :mod:`.tools`'."""

from __future__ import annotations

import datetime as dt
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncEngine

from pinecall_call_log.store.tables import AGENT_ENTRIES, CALLBACKS, CALLS
from pinecall_contracts.calls import AgentEntry, AgentLog, CallbackRequest
from pinecall_servicekit import db
from pinecall_servicekit.errors import Forbidden, Unprocessable

ONCE_PER_MESSAGE = frozenset({"message.waiting", "message.taken", "message.expired"})
"""Agent-log kinds written once per WhatsApp message (``data.message``; the unique index
``uq_agent_entries_message`` of migration 0009)."""


class AgentStore:
    """The agent log and callbacks in Postgres."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def append(
        self,
        environment: str,
        agent: str,
        kind: str,
        data: dict[str, Any],
        now: dt.datetime,
        key: str | None = None,
    ) -> AgentEntry:
        """One entry on the agent's log (``fleet.full``, ``agent.draining``, …). An entry with
        a ``key`` (its writer's id) is written once per agent's log: a second append with that
        key answers the first, writing nothing (a writer re-sending after a crash). A WhatsApp
        message's entries (:data:`ONCE_PER_MESSAGE`, ``data.message`` a string: its wamid) are
        written once per message and kind the same way (Meta delivers a message again for
        days; two chat replicas may take it at once)."""
        message = data.get("message")
        entries = AGENT_ENTRIES.c
        same = sa.and_(entries.environment == environment, entries.agent == agent)
        if key is not None:
            held = sa.and_(same, entries.key == key)
        elif kind in ONCE_PER_MESSAGE and isinstance(message, str):
            held = sa.and_(same, entries.kind == kind, entries.data["message"].astext == message)
        else:
            held = None
        async with db.translate_errors("writing the agent log"), self.engine.begin() as conn:
            if held is None:
                seq = await self._append(conn, environment, agent, kind, data, now)
                return AgentEntry(kind=kind, data=data, seq=seq, ts=now)
            row = (
                await conn.execute(
                    insert(AGENT_ENTRIES)
                    .values(
                        environment=environment, agent=agent, kind=kind, ts=now, data=data, key=key
                    )
                    .on_conflict_do_nothing()
                    .returning(AGENT_ENTRIES)
                )
            ).first()
            if row is None:
                row = (await conn.execute(sa.select(AGENT_ENTRIES).where(held))).one()
        return AgentEntry(kind=row.kind, data=row.data, seq=row.seq, ts=row.ts, key=row.key)

    @staticmethod
    async def _append(
        conn: Any, environment: str, agent: str, kind: str, data: dict[str, Any], now: dt.datetime
    ) -> int:
        return int(
            (
                await conn.execute(
                    insert(AGENT_ENTRIES)
                    .values(environment=environment, agent=agent, kind=kind, ts=now, data=data)
                    .returning(AGENT_ENTRIES.c.seq)
                )
            ).scalar_one()
        )

    async def agent_log(self, environment: str, agent: str, after: int = 0) -> AgentLog:
        async with db.translate_errors("reading the agent log"), self.engine.connect() as conn:
            rows = (
                await conn.execute(
                    sa.select(AGENT_ENTRIES)
                    .where(
                        AGENT_ENTRIES.c.environment == environment,
                        AGENT_ENTRIES.c.agent == agent,
                        AGENT_ENTRIES.c.seq > after,
                    )
                    .order_by(AGENT_ENTRIES.c.seq)
                    .limit(10_000)
                )
            ).all()
        entries = [
            AgentEntry(kind=r.kind, data=r.data, seq=r.seq, ts=r.ts, key=r.key) for r in rows
        ]
        return AgentLog(agent=agent, environment=environment, entries=entries)

    async def callback(
        self, environment: str, request: CallbackRequest, now: dt.datetime
    ) -> tuple[AgentEntry, bool]:
        """Write ``callback.requested`` on the agent's log and the callback's row; one per call of
        the environment (a second request naming the same call answers the first's entry).

        A call this log holds must be of ``environment`` (``Forbidden``) and of the request's
        agent (``Unprocessable``): a key of one environment never reads nor blocks another's
        call backs. A call it does not hold (a visitor refused before any call opened) is
        taken as named."""
        async with db.translate_errors("writing a callback"), self.engine.begin() as conn:
            if request.call is not None:
                await conn.execute(
                    sa.select(
                        sa.func.pg_advisory_xact_lock(
                            sa.func.hashtextextended(f"{environment}/{request.call}", 0)
                        )
                    )
                )
                call = (
                    await conn.execute(
                        sa.select(CALLS.c.environment, CALLS.c.agent).where(
                            CALLS.c.call_id == request.call
                        )
                    )
                ).first()
                if call is not None and call.environment != environment:
                    raise Forbidden(f"call {request.call} is not of {environment}")
                if call is not None and call.agent != request.agent:
                    raise Unprocessable(
                        f"call {request.call} is {call.agent}'s, not {request.agent}'s"
                    )
                held = (
                    await conn.execute(
                        sa.select(AGENT_ENTRIES)
                        .join(CALLBACKS, CALLBACKS.c.agent_seq == AGENT_ENTRIES.c.seq)
                        .where(
                            CALLBACKS.c.call_id == request.call,
                            CALLBACKS.c.environment == environment,
                        )
                    )
                ).first()
                if held is not None:
                    entry = AgentEntry(kind=held.kind, data=held.data, seq=held.seq, ts=held.ts)
                    return entry, False
            data: dict[str, Any] = {
                "number": request.number,
                "contact": request.contact,
                "reason": request.reason,
                "call": request.call,
            }
            data = {k: v for k, v in data.items() if v is not None}
            seq = await self._append(
                conn, environment, request.agent, "callback.requested", data, now
            )
            await conn.execute(
                sa.insert(CALLBACKS).values(
                    environment=environment,
                    agent=request.agent,
                    call_id=request.call,
                    number=request.number,
                    contact=request.contact,
                    reason=request.reason,
                    agent_seq=seq,
                    requested_at=now,
                )
            )
        return AgentEntry(kind="callback.requested", data=data, seq=seq, ts=now), True
