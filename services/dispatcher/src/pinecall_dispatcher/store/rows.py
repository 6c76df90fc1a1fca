"""A room's row as the dispatcher's code reads it, and the journal's one insert."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from pinecall_dispatcher.store.tables import JOURNAL


@dataclass(frozen=True, slots=True, kw_only=True)
class RoomRow:
    """One ``dispatcher.rooms`` row (see :mod:`.tables` for its states)."""

    call: str
    environment: str
    fleet: str
    room: str
    room_sid: str | None
    ring: str | None
    agent: str
    org: str
    caller: str
    caller_identity: str | None
    number: str | None
    state: str
    job: str
    written: int | None
    tried: list[str]
    worker: str | None
    dispatch: str | None
    waited: bool
    outcome: str | None
    context: dict[str, Any] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    admitted_until: dt.datetime | None = None
    arrived_at: dt.datetime | None = None
    offered_at: dt.datetime | None = None
    opened_at: dt.datetime | None = None
    ended_at: dt.datetime | None = None
    created_at: dt.datetime | None = None

    @classmethod
    def of(cls, row: sa.Row[Any]) -> RoomRow:
        return cls(**row._mapping)


async def journal(conn: AsyncConnection, rows: list[tuple[RoomRow, str]], at: dt.datetime) -> None:
    """Write each ``(room, line)`` on the journal, in order."""
    if rows:
        await conn.execute(
            sa.insert(JOURNAL),
            [
                {"call": r.call, "room": r.room, "fleet": r.fleet, "at": at, "line": line}
                for r, line in rows
            ],
        )
