"""What an app socket is handed from Postgres: an agent's open calls, a call's tool calls still
waiting, and the app's commands written once per id (the only SQL of the socket).

A command is a ``call.command`` entry on the call's log, written under the call's head lock, so
two copies of one command id (a retry through any replica) find each other: the first writes,
the second reads the seq it took. The log is the command stream a worker follows.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from pinecall_call_log.store.head import append_own, lock_head, record_of
from pinecall_call_log.store.tables import CALLS, ENTRIES, TOOL_CALLS
from pinecall_contracts.calls import CallRecord
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

    async def open_calls(self, org: str, environment: str, agent: str) -> list[CallRecord]:
        """The agent's calls not ended yet, oldest first (what a registering socket may take)."""
        query = (
            sa.select(CALLS)
            .where(
                CALLS.c.org == org,
                CALLS.c.environment == environment,
                CALLS.c.agent == agent,
                CALLS.c.ended_at.is_(None),
            )
            .order_by(CALLS.c.opened_at, CALLS.c.call_id)
        )
        async with db.translate_errors("reading open calls"), self.engine.connect() as conn:
            return [record_of(r) for r in (await conn.execute(query)).all()]

    async def waiting_tools(self, call: str, now: dt.datetime) -> list[WaitingTool]:
        """The call's tool calls with no result and a deadline still ahead, in log order."""
        t = TOOL_CALLS.c
        query = (
            sa.select(TOOL_CALLS)
            .where(t.call_id == call, t.result_seq.is_(None), t.deadline > now)
            .order_by(t.call_seq)
        )
        async with db.translate_errors("reading waiting tools"), self.engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [
            WaitingTool(
                id=r.tool_id, name=r.name, arguments=r.arguments, deadline=r.deadline,
                seq=r.call_seq,
            )
            for r in rows
        ]  # fmt: skip

    async def command(self, call: str, data: dict[str, Any], now: dt.datetime) -> tuple[int, bool]:
        """Write ``call.command`` (``data`` holds its app-minted ``id``) once per id; returns its
        seq and whether this request wrote it. ``NotFound`` for an unknown call, ``Conflict`` for
        an ended or sealed one (a command for a call that is over is refused, nothing written)."""
        async with db.translate_errors("writing a command"), self.engine.begin() as conn:
            head = await lock_head(conn, call)
            held = (
                await conn.execute(
                    sa.select(ENTRIES.c.seq).where(
                        ENTRIES.c.call_id == call,
                        ENTRIES.c.kind == "call.command",
                        ENTRIES.c.data["id"].astext == data["id"],
                    )
                )
            ).first()
            if held is not None:
                return int(held.seq), False
            if head.ended_at is not None:
                raise Conflict(f"call {call} has ended")
            return await append_own(conn, head, "call.command", data, now), True
