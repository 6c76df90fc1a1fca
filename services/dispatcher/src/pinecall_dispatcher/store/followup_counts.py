"""The follow-ups counted for the operator (``fleet list``, ``doctor``, ``/metrics``): each
environment's owed and due, and its tries ended in a window."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from pinecall_dispatcher.store.tables import FOLLOWUP_TRIES, FOLLOWUPS
from pinecall_servicekit import db


@dataclass(frozen=True, slots=True)
class Counts:
    """An environment's follow-ups now, and its tries ended in the window."""

    waiting: int = 0
    """Waiting or dialling: owed."""
    due: int = 0
    """Waiting and due now (not dialled for want of a seat)."""
    tries: int = 0
    not_reached: int = 0


async def counts(engine: AsyncEngine, now: dt.datetime, window_s: float) -> dict[str, Counts]:
    """Each environment's follow-ups owed and due, and its tries ended in ``window_s``."""
    since = now - dt.timedelta(seconds=window_s)
    owed = FOLLOWUPS.c.state.in_(("waiting", "dialling"))
    due_now = sa.and_(FOLLOWUPS.c.state == "waiting", FOLLOWUPS.c.due_at <= now)
    f = sa.select(
        FOLLOWUPS.c.environment,
        sa.func.count().filter(owed),
        sa.func.count().filter(due_now),
    ).where(owed)
    t = (
        sa.select(
            FOLLOWUP_TRIES.c.environment,
            sa.func.count().filter(FOLLOWUP_TRIES.c.outcome != "not_ready"),
            sa.func.count().filter(FOLLOWUP_TRIES.c.outcome == "not_reached"),
        )
        .where(FOLLOWUP_TRIES.c.ended_at > since)
        .group_by(FOLLOWUP_TRIES.c.environment)
    )
    async with db.translate_errors("counting follow-ups"), engine.connect() as conn:
        owed_rows = (await conn.execute(f.group_by(FOLLOWUPS.c.environment))).all()
        tried = (await conn.execute(t)).all()
    out: dict[str, Counts] = {}
    for env, waiting, due_n in owed_rows:
        out[env] = Counts(waiting=waiting, due=due_n)
    for env, n, not_reached in tried:
        base = out.get(env, Counts())
        out[env] = Counts(waiting=base.waiting, due=base.due, tries=n, not_reached=not_reached)
    return out
