"""The follow-ups' notes: the agent-log entries their changes owe, kept in an outbox (issue 18,
"Call backs, dialled": each try and its outcome on the agent's log, once).

A change of a follow-up or a try (:mod:`.followups`) inserts its notes with :func:`owe` in its
own transaction, so the change and what it owes the log commit together or not at all. The
dialler sends the notes owed, oldest first, each with :func:`entry_key` as the entry's key (call-log
writes an entry once per key), and marks each written after its answer: a crash between the
change and the send, or between the send and the mark, sends again and writes nothing twice.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from pinecall_dispatcher.store.tables import FOLLOWUP_NOTES
from pinecall_servicekit import db


@dataclass(frozen=True, slots=True)
class Note:
    """An entry owed to ``agent``'s log of ``environment`` (``id`` 0 until it is kept)."""

    environment: str
    agent: str
    kind: str
    data: dict[str, Any]
    id: int = 0


def entry_key(note: Note) -> str:
    """The entry's key on the agent's log: the note's own row, so a note sent again is written
    once."""
    return f"followup-note-{note.id}"


async def owe(conn: AsyncConnection, notes: Sequence[Note], now: dt.datetime) -> None:
    """Keep ``notes`` in the transaction of ``conn`` (the change that owes them)."""
    if notes:
        await conn.execute(
            sa.insert(FOLLOWUP_NOTES),
            [
                {
                    "environment": n.environment,
                    "agent": n.agent,
                    "kind": n.kind,
                    "data": n.data,
                    "made_at": now,
                }
                for n in notes
            ],
        )


class NoteStore:
    """The notes owed and their marks."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def owed(self, limit: int = 500) -> list[Note]:
        """Notes not known written, oldest first."""
        query = (
            sa.select(FOLLOWUP_NOTES)
            .where(FOLLOWUP_NOTES.c.written_at.is_(None))
            .order_by(FOLLOWUP_NOTES.c.id)
            .limit(limit)
        )
        async with db.translate_errors("reading notes"), self.engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [Note(r.environment, r.agent, r.kind, r.data, r.id) for r in rows]

    async def written(self, note: Note, now: dt.datetime) -> None:
        """``note`` is on its agent's log."""
        async with db.translate_errors("marking a note"), self.engine.begin() as conn:
            await conn.execute(
                sa.update(FOLLOWUP_NOTES)
                .where(FOLLOWUP_NOTES.c.id == note.id)
                .values(written_at=now)
            )
