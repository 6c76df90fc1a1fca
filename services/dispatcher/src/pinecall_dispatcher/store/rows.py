"""A room's row as the dispatcher's code reads it, and the journal's one insert."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from pinecall_dispatcher.store.tables import JOURNAL, ROOMS


@dataclass(frozen=True, slots=True, kw_only=True)
class Arrival:
    """A caller alone in a room with a ring nobody took: the call to place."""

    call: str
    environment: str
    fleet: str
    room: str
    room_sid: str | None
    ring: str | None
    """The ring's dispatch id; None for a visitor placed from its admission (its room was made
    before its join, so LiveKit never applied the token's ring)."""
    agent: str
    org: str
    caller: str
    caller_identity: str
    number: str | None
    context: dict[str, Any] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)


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
    sip_trunk: str | None = None
    admitted_until: dt.datetime | None = None
    arrived_at: dt.datetime | None = None
    offered_at: dt.datetime | None = None
    opened_at: dt.datetime | None = None
    ended_at: dt.datetime | None = None
    created_at: dt.datetime | None = None

    @classmethod
    def of(cls, row: sa.Row[Any]) -> RoomRow:
        return cls(**row._mapping)


async def journal(conn: AsyncConnection, lines: Sequence[tuple[RoomRow, str, dt.datetime]]) -> None:
    """Write each ``(room, line, when)`` on the journal, in order."""
    if lines:
        await conn.execute(
            sa.insert(JOURNAL),
            [
                {"call": r.call, "room": r.room, "fleet": r.fleet, "at": at, "line": line}
                for r, line, at in lines
            ],
        )


def columns(alias: str = "") -> str:
    """Every column of ``rooms`` (a :class:`RoomRow`'s fields), for a statement's ``SELECT`` or
    ``RETURNING``, each prefixed with ``alias.`` if given."""
    prefix = f"{alias}." if alias else ""
    return ", ".join(f"{prefix}{c.name}" for c in ROOMS.c)


@dataclass(frozen=True, slots=True, kw_only=True)
class Taken:
    """An offer (or the overflow) taken under the fleet's lock, to dispatch, and its journal
    line (written with the dispatch's outcome, dated when it was decided)."""

    row: RoomRow
    line: str
    at: dt.datetime
