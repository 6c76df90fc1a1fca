"""Tool calls once per id (the only SQL of them).

A tool call's row is made under its call's head lock together with its ``tool.call`` entry, and
its one result under the same lock with its ``tool.result`` entry: whichever replica gets there
first writes, every later one reads what was written (seed 002, "The gateway restarts"). The
common case of each (a new id asked, the first answer) is one statement on psycopg itself
(:data:`ASK_TOOL`, :data:`ANSWER_TOOL`); whatever else is judged under the head's lock.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

import psycopg
import sqlalchemy as sa
from psycopg.rows import namedtuple_row
from sqlalchemy.ext.asyncio import AsyncEngine

from pinecall_call_log.store.head import append_own, json_text, lock_head
from pinecall_call_log.store.tables import CALLS, ENTRIES, TOOL_CALLS
from pinecall_contracts.calls import ToolCall, ToolResult
from pinecall_servicekit import db
from pinecall_servicekit.errors import Conflict, NotFound

NEXT_SEQ = f"""WITH moved AS (
        UPDATE {CALLS.fullname} SET last_seq = last_seq + 1
        WHERE call_id = :call AND sealed_at IS NULL
        RETURNING last_seq
    )"""
"""The head of ``:call``, if not sealed, locked by taking its next seq (``moved.last_seq``): the
first part of :data:`ASK_TOOL` and :data:`ANSWER_TOOL`."""

ASK_TOOL = db.driver_sql(
    sa.text(
        f"""
    {NEXT_SEQ}, asked AS (
        INSERT INTO {TOOL_CALLS.fullname} (call_id, tool_id, name, arguments, deadline, call_seq)
        SELECT :call, :tool, :name, CAST(:arguments AS jsonb), :deadline, moved.last_seq
        FROM moved
        ON CONFLICT DO NOTHING
        RETURNING call_seq
    ), written AS (
        INSERT INTO {ENTRIES.fullname} (call_id, seq, kind, ts, data)
        SELECT :call, asked.call_seq, 'tool.call', :now, CAST(:data AS jsonb) FROM asked
    )
    SELECT call_seq FROM asked
    """
    )
)
"""A new tool call in one statement: the head (locked by its update, not sealed) takes the next
seq, the tool call's row and its ``tool.call`` entry are written under it, and its seq is the
one row. No row when the call is unknown or sealed, or the id was asked before (the row is there,
committed or committing: ``ON CONFLICT`` waits for it); then the head moved for nothing, so the
transaction is rolled back and the ask judged under the head's lock."""

ANSWER_TOOL = db.driver_sql(
    sa.text(
        f"""
    {NEXT_SEQ}, answered AS (
        UPDATE {TOOL_CALLS.fullname} AS t
        SET result = CAST(:result AS jsonb), error = :error, result_seq = moved.last_seq
        FROM moved
        WHERE t.call_id = :call AND t.tool_id = :tool AND t.result_seq IS NULL
          AND NOT (:in_time AND CAST(:now AS timestamptz) > t.deadline)
        RETURNING t.result_seq
    ), written AS (
        INSERT INTO {ENTRIES.fullname} (call_id, seq, kind, ts, data)
        SELECT :call, answered.result_seq, 'tool.result', :now, CAST(:data AS jsonb)
        FROM answered
    )
    SELECT result_seq FROM answered
    """
    )
)
"""A tool call's first result in one statement: under the head (locked by its update, not
sealed), the row with no result yet (and, ``:in_time``, not past its deadline) takes it and the
next seq, and its ``tool.result`` entry is written there. No row otherwise (an unknown call or
tool call, a sealed call, a result held, an answer past the deadline): rolled back and judged
under the head's lock. Two answers at once queue on the head; the second's update re-reads the
row the first wrote (READ COMMITTED), finds its result and takes nothing."""

TOOL_RESULT = db.driver_sql(
    sa.select(
        TOOL_CALLS.c.tool_id, TOOL_CALLS.c.result, TOOL_CALLS.c.error, TOOL_CALLS.c.result_seq
    ).where(
        TOOL_CALLS.c.call_id == sa.bindparam("call"), TOOL_CALLS.c.tool_id == sa.bindparam("tool")
    )
)


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


def _result(call: str, row: Any) -> ToolResult | None:
    """A ``tool_calls`` row's result (SQLAlchemy's row or psycopg's named tuple)."""
    if row.result_seq is None:
        return None
    return ToolResult(
        call=call, id=row.tool_id, result=row.result, error=row.error, seq=row.result_seq
    )


class ToolStore:
    """Tool calls in Postgres, each asked and answered once per id."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self._autocommit = db.autocommit(engine)

    async def _one_statement(
        self, what: str, statement: str, parameters: dict[str, Any]
    ) -> int | None:
        """:data:`ASK_TOOL` or :data:`ANSWER_TOOL` in a transaction of its own: the seq its row
        took, or None when it missed, its transaction rolled back (its head's update, made for
        nothing, undone); the caller then judges the request under the head's lock."""
        async with db.translate_errors(what), db.driver_transaction(self.engine) as pg:
            row = await (await pg.execute(statement, parameters)).fetchone()
            if row is None:
                raise psycopg.Rollback  # left by the block, which it rolls back
        return None if row is None else int(row[0])

    async def ask(self, call: str, tool: ToolCall, now: dt.datetime) -> ToolState:
        """Write ``tool.call`` once per ``tool.id``; its deadline is ``now + timeout_s``.

        A second ask of the same id writes nothing and answers the state held (its deadline from
        the first ``tool.call``, its result if one was written). ``NotFound``/``Conflict`` for an
        unknown or sealed call.
        """
        deadline = now + dt.timedelta(seconds=tool.timeout_s)
        data = {
            "id": tool.id,
            "name": tool.name,
            "arguments": tool.arguments,
            "timeout_s": tool.timeout_s,
        }
        asked = await self._one_statement(
            "asking a tool",
            ASK_TOOL,
            {
                "call": call,
                "tool": tool.id,
                "name": tool.name,
                "arguments": json_text(tool.arguments),
                "deadline": deadline,
                "now": now,
                "data": json_text(data),
            },
        )
        if asked is not None:
            return ToolState(asked=True, deadline=deadline, result=None, seq=asked)
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
            seq = await append_own(conn, head, "tool.call", data, now)
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

    async def finish(
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
        data = {"id": tool_id, "result": result, "error": error}
        answered = await self._one_statement(
            "answering a tool",
            ANSWER_TOOL,
            {
                "call": call,
                "tool": tool_id,
                "result": json_text(result),
                "error": error,
                "in_time": in_time,
                "now": now,
                "data": json_text(data),
            },
        )
        if answered is not None:
            written = ToolResult(call=call, id=tool_id, result=result, error=error, seq=answered)
            return written, True
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
            seq = await append_own(conn, head, "tool.result", data, now)
            await conn.execute(
                sa.update(TOOL_CALLS)
                .where(*where)
                .values(result=result, error=error, result_seq=seq)
            )
            return ToolResult(call=call, id=tool_id, result=result, error=error, seq=seq), True

    async def result(self, call: str, tool_id: str) -> ToolResult | None:
        """The tool call's result, None while it has none (or there is no such tool call): one
        statement in autocommit on psycopg (read after every ask)."""
        async with (
            db.translate_errors("reading a tool result"),
            db.driver_connection(self._autocommit) as pg,
            pg.cursor(row_factory=namedtuple_row) as cursor,
        ):
            await cursor.execute(TOOL_RESULT, {"call": call, "tool": tool_id})
            row = await cursor.fetchone()
        return None if row is None else _result(call, row)
