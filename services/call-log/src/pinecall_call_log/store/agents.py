"""Tool calls once per id, the agent log and callbacks (the only SQL of them).

A tool call's row is made under its call's head lock together with its ``tool.call`` entry, and
its one result under the same lock with its ``tool.result`` entry: whichever replica gets there
first writes, every later one reads what was written (seed 002, "The gateway restarts").
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncEngine

from pinecall_call_log.store.head import append_own, lock_head
from pinecall_call_log.store.tables import AGENT_ENTRIES, CALLBACKS, CALLS, TOOL_CALLS
from pinecall_contracts.calls import AgentEntry, AgentLog, CallbackRequest, ToolCall, ToolResult
from pinecall_servicekit import db
from pinecall_servicekit.errors import Conflict, Forbidden, NotFound, Unprocessable

ONCE_PER_MESSAGE = frozenset({"message.waiting", "message.taken", "message.expired"})
"""Agent-log kinds written once per WhatsApp message (``data.message``; the unique index
``uq_agent_entries_message`` of migration 0009)."""


class PastDeadline(Conflict):
    """A tool's answer after its deadline: the worker stopped waiting, the model went on."""

    code = "past_deadline"


@dataclass(frozen=True, slots=True)
class ToolState:
    """A tool call as the log holds it: ``asked`` when this request wrote its ``tool.call``."""

    asked: bool
    deadline: dt.datetime
    result: ToolResult | None
    seq: int
    """The seq of its ``tool.call`` entry."""


def _result(call: str, row: sa.Row[Any]) -> ToolResult | None:
    if row.result_seq is None:
        return None
    return ToolResult(
        call=call, id=row.tool_id, result=row.result, error=row.error, seq=row.result_seq
    )


class AgentStore:
    """Tool calls, the agent log and callbacks in Postgres."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def ask_tool(self, call: str, tool: ToolCall, now: dt.datetime) -> ToolState:
        """Write ``tool.call`` once per ``tool.id``; its deadline is ``now + timeout_s``.

        A second ask of the same id writes nothing and answers the state held (its deadline from
        the first ``tool.call``, its result if one was written). ``NotFound``/``Conflict`` for an
        unknown or sealed call.
        """
        async with db.translate_errors("asking a tool"), self.engine.begin() as conn:
            head = await lock_head(conn, call)
            row = (
                await conn.execute(
                    sa.select(TOOL_CALLS).where(
                        TOOL_CALLS.c.call_id == call, TOOL_CALLS.c.tool_id == tool.id
                    )
                )
            ).first()
            if row is not None:
                return ToolState(
                    asked=False, deadline=row.deadline, result=_result(call, row), seq=row.call_seq
                )
            data = {
                "id": tool.id,
                "name": tool.name,
                "arguments": tool.arguments,
                "timeout_s": tool.timeout_s,
            }
            seq = await append_own(conn, head, "tool.call", data, now)
            deadline = now + dt.timedelta(seconds=tool.timeout_s)
            await conn.execute(
                sa.insert(TOOL_CALLS).values(
                    call_id=call,
                    tool_id=tool.id,
                    name=tool.name,
                    arguments=tool.arguments,
                    deadline=deadline,
                    call_seq=seq,
                )
            )
            return ToolState(asked=True, deadline=deadline, result=None, seq=seq)

    async def finish_tool(
        self,
        call: str,
        tool_id: str,
        result: Any,
        error: str | None,
        now: dt.datetime,
        *,
        in_time: bool = False,
    ) -> tuple[ToolResult, bool]:
        """Write a tool call's one ``tool.result``; returns it and whether this request wrote it
        (a second answer gets the first). ``NotFound`` for an unknown call or tool call;
        ``in_time`` (the socket's answers): ``PastDeadline``, nothing written, for an answer
        after the deadline that finds no result or the timeout (which is written without it)."""
        async with db.translate_errors("answering a tool"), self.engine.begin() as conn:
            head = await lock_head(conn, call)
            where = (TOOL_CALLS.c.call_id == call, TOOL_CALLS.c.tool_id == tool_id)
            row = (await conn.execute(sa.select(TOOL_CALLS).where(*where))).first()
            if row is None:
                raise NotFound(f"no tool call {tool_id} on call {call}")
            held = _result(call, row)
            late = in_time and now > row.deadline
            if held is not None and not (late and held.error == "timeout"):
                return held, False
            if late:
                raise PastDeadline(f"tool call {tool_id} of call {call} is past its deadline")
            data = {"id": tool_id, "result": result, "error": error}
            seq = await append_own(conn, head, "tool.result", data, now)
            await conn.execute(
                sa.update(TOOL_CALLS)
                .where(*where)
                .values(result=result, error=error, result_seq=seq)
            )
            return ToolResult(call=call, id=tool_id, result=result, error=error, seq=seq), True

    async def tool_result(self, call: str, tool_id: str) -> ToolResult | None:
        async with db.translate_errors("reading a tool result"), self.engine.connect() as conn:
            row = (
                await conn.execute(
                    sa.select(TOOL_CALLS).where(
                        TOOL_CALLS.c.call_id == call, TOOL_CALLS.c.tool_id == tool_id
                    )
                )
            ).first()
        return None if row is None else _result(call, row)

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
