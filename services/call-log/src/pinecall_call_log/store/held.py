"""What an app socket is handed from Postgres: which socket holds which call (``app_holds``: a
call without a row is parked), an agent's parked calls, a call's tool calls still waiting, the
tool calls a draining socket still runs (``tool_holds``), and the app's commands written once per
id (the only SQL of the socket).

A hold is claimed with an insert that does nothing on a conflict, so of two replicas handing one
call at once exactly one wins; a replica not heard from has its holds taken back by a delete that
returns them, so exactly one survivor hands each again. A tool hold is let go the same way: a
delete that returns what it let go, to one caller, which sends each to the call's holder.

A command is a ``call.command`` entry on the call's log, written under the call's head lock, so
two copies of one command id (a retry through any replica) find each other: the first writes,
the second reads the seq it took. The log is the command stream a worker follows.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncEngine

from pinecall_call_log.store.head import append_own, lock_head, record_of
from pinecall_call_log.store.tables import APP_HOLDS, CALLS, ENTRIES, TOOL_CALLS, TOOL_HOLDS
from pinecall_contracts.calls import CallRecord
from pinecall_contracts.entries import CALL_COMMAND
from pinecall_servicekit import db
from pinecall_servicekit.errors import Conflict


@dataclass(frozen=True, slots=True)
class WaitingTool:
    """A tool call written and not answered, before its deadline."""

    id: str
    name: str
    arguments: dict[str, Any]
    deadline: dt.datetime
    seq: int


class HeldStore:
    """An agent's open calls, their waiting tool calls and the app's commands."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def parked_calls(self, org: str, environment: str, agent: str) -> list[CallRecord]:
        """The agent's calls not ended that no socket holds, oldest first."""
        query = (
            sa.select(CALLS)
            .outerjoin(APP_HOLDS, APP_HOLDS.c.call_id == CALLS.c.call_id)
            .where(
                CALLS.c.org == org,
                CALLS.c.environment == environment,
                CALLS.c.agent == agent,
                CALLS.c.ended_at.is_(None),
                APP_HOLDS.c.call_id.is_(None),
            )
            .order_by(CALLS.c.opened_at, CALLS.c.call_id)
        )
        async with db.translate_errors("reading parked calls"), self.engine.connect() as conn:
            return [record_of(r) for r in (await conn.execute(query)).all()]

    async def claim(
        self, record: CallRecord, replica: str, instance: str, now: dt.datetime
    ) -> bool:
        """Hold ``record``'s call for ``instance`` on ``replica``; False when a socket holds it
        already (on any replica)."""
        statement = (
            insert(APP_HOLDS)
            .values(
                call_id=record.call, environment=record.environment, org=record.org,
                agent=record.agent, replica=replica, instance=instance, since=now,
            )
            .on_conflict_do_nothing(index_elements=["call_id"])
            .returning(APP_HOLDS.c.call_id)
        )  # fmt: skip
        async with db.translate_errors("holding a call"), self.engine.begin() as conn:
            return (await conn.execute(statement)).first() is not None

    async def holder(self, call: str) -> str | None:
        """The replica whose socket holds ``call``, or None (parked, or not open)."""
        statement = sa.select(APP_HOLDS.c.replica).where(APP_HOLDS.c.call_id == call)
        async with db.translate_errors("reading a hold"), self.engine.connect() as conn:
            found: str | None = await conn.scalar(statement)
        return found

    async def release(self, call: str, replica: str) -> None:
        """The call is parked: its hold on ``replica`` is let go (none: nothing happens)."""
        statement = sa.delete(APP_HOLDS).where(
            APP_HOLDS.c.call_id == call, APP_HOLDS.c.replica == replica
        )
        async with db.translate_errors("parking a call"), self.engine.begin() as conn:
            await conn.execute(statement)

    async def take_back(
        self, alive: list[str], before: dt.datetime
    ) -> list[tuple[str, str, str, str]]:
        """Park every call held on a replica not in ``alive`` since before ``before`` (a replica
        killed, or stopped without letting go); returns them as (call, agent, environment, org),
        each to exactly one caller."""
        h = APP_HOLDS.c
        statement = (
            sa.delete(APP_HOLDS)
            .where(h.replica.not_in(alive), h.since < before)
            .returning(h.call_id, h.agent, h.environment, h.org)
        )
        async with db.translate_errors("taking back holds"), self.engine.begin() as conn:
            return [
                (r.call_id, r.agent, r.environment, r.org)
                for r in (await conn.execute(statement)).all()
            ]

    async def waiting_tools(
        self, call: str, now: dt.datetime, *, held: bool = False
    ) -> list[WaitingTool]:
        """The call's tool calls with no result and a deadline still ahead, in log order; those
        a draining socket still runs (a ``tool_holds`` row) only with ``held``."""
        t = TOOL_CALLS.c
        query = (
            sa.select(TOOL_CALLS)
            .where(t.call_id == call, t.result_seq.is_(None), t.deadline > now)
            .order_by(t.call_seq)
        )
        if not held:
            query = query.where(~_tool_held(t.call_id, t.tool_id))
        async with db.translate_errors("reading waiting tools"), self.engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [
            WaitingTool(
                id=r.tool_id, name=r.name, arguments=r.arguments, deadline=r.deadline,
                seq=r.call_seq,
            )
            for r in rows
        ]  # fmt: skip

    async def keep_tools(
        self, call: str, tools: list[str], replica: str, instance: str, now: dt.datetime
    ) -> None:
        """``instance`` on ``replica`` drained ``call`` while it ran ``tools`` (their ids): the
        call's next holder is not sent them until :meth:`let_go_tools` or :meth:`take_back_tools`."""
        rows = [
            {"call_id": call, "tool_id": tool, "replica": replica, "instance": instance,
             "since": now}
            for tool in tools
        ]  # fmt: skip
        statement = insert(TOOL_HOLDS).values(rows).on_conflict_do_nothing()
        async with db.translate_errors("keeping running tools"), self.engine.begin() as conn:
            await conn.execute(statement)

    async def tool_kept(self, call: str, tool: str) -> bool:
        """Whether a draining socket still runs the tool call (its next holder is not sent it)."""
        query = sa.select(_tool_held(sa.literal(call), sa.literal(tool)))
        async with db.translate_errors("reading a running tool"), self.engine.connect() as conn:
            return bool((await conn.execute(query)).scalar())

    async def let_go_tools(
        self, replica: str, instance: str, tools: list[tuple[str, str]]
    ) -> list[tuple[str, str]]:
        """The socket of ``instance`` on ``replica`` answered or closed: its holds of ``tools``
        ((call, tool id) pairs) go; returns those that were there, each to one caller."""
        if not tools:
            return []
        h = TOOL_HOLDS.c
        statement = (
            sa.delete(TOOL_HOLDS)
            .where(
                h.replica == replica,
                h.instance == instance,
                sa.tuple_(h.call_id, h.tool_id).in_(tools),
            )
            .returning(h.call_id, h.tool_id)
        )
        async with db.translate_errors("letting go of tools"), self.engine.begin() as conn:
            return [(r.call_id, r.tool_id) for r in (await conn.execute(statement)).all()]

    async def take_back_tools(self, alive: list[str], before: dt.datetime) -> list[tuple[str, str]]:
        """Let go of every tool call run by a socket of a replica not in ``alive`` since before
        ``before``; returns them as (call, tool id), each to exactly one caller."""
        h = TOOL_HOLDS.c
        statement = (
            sa.delete(TOOL_HOLDS)
            .where(h.replica.not_in(alive), h.since < before)
            .returning(h.call_id, h.tool_id)
        )
        async with db.translate_errors("taking back tools"), self.engine.begin() as conn:
            return [(r.call_id, r.tool_id) for r in (await conn.execute(statement)).all()]

    async def command(self, call: str, data: dict[str, Any], now: dt.datetime) -> tuple[int, bool]:
        """Write ``call.command`` (``data`` holds its app-minted ``id``) once per id; returns its
        seq and whether this request wrote it. ``NotFound`` for an unknown call, ``Conflict`` for
        an ended or sealed one (a command for a call that is over is refused, nothing written)
        and for an id written already with another command (an idempotency key reused)."""
        async with db.translate_errors("writing a command"), self.engine.begin() as conn:
            head = await lock_head(conn, call)
            held = (
                await conn.execute(
                    sa.select(ENTRIES.c.seq, ENTRIES.c.data).where(
                        ENTRIES.c.call_id == call,
                        ENTRIES.c.kind == CALL_COMMAND,
                        ENTRIES.c.data["id"].astext == data["id"],
                    )
                )
            ).first()
            if held is not None:
                if held.data != data:
                    raise Conflict(f"command {data['id']} of call {call} was another command")
                return int(held.seq), False
            if head.ended_at is not None:
                raise Conflict(f"call {call} has ended")
            return await append_own(conn, head, CALL_COMMAND, data, now), True


def _tool_held(call: Any, tool: Any) -> sa.Exists:
    h = TOOL_HOLDS.c
    return sa.exists().where(h.call_id == call, h.tool_id == tool)
