"""The recordings that failed lately (issue 19: "``doctor`` counts them"): the
``call.recording_failed`` entries written since a time, by environment, and the newest one.

One statement over the partial index ``ix_entries_recording_failed`` (``ts`` of those entries
only, migration 0011), so the read costs the failures of the window, however many entries the
log holds; each joined to its call for the environment.
"""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from pinecall_call_log.store.tables import CALLS, ENTRIES
from pinecall_contracts import entries
from pinecall_contracts.recordings import RecordingsFailedCount
from pinecall_servicekit import db


class FailedRecordings:
    """Reads of ``call.recording_failed`` entries; driver errors become ``StoreUnavailable``."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def since(self, since: dt.datetime) -> RecordingsFailedCount:
        """The failures written at or after ``since`` (UTC)."""
        failed = sa.and_(ENTRIES.c.kind == entries.CALL_RECORDING_FAILED, ENTRIES.c.ts >= since)
        by_environment = (
            sa.select(CALLS.c.environment, sa.func.count())
            .select_from(ENTRIES.join(CALLS, CALLS.c.call_id == ENTRIES.c.call_id))
            .where(failed)
            .group_by(CALLS.c.environment)
        )
        newest = (
            sa.select(ENTRIES.c.call_id, ENTRIES.c.data["reason"].astext)
            .where(failed)
            .order_by(ENTRIES.c.ts.desc())
            .limit(1)
        )
        async with db.translate_errors("counting failed recordings"), self.engine.connect() as c:
            counts = {e: n for e, n in (await c.execute(by_environment)).all()}
            last = (await c.execute(newest)).first()
        return RecordingsFailedCount(
            since=since,
            count=sum(counts.values()),
            environments=counts,
            last_call=last[0] if last else None,
            last_reason=last[1] if last else None,
        )
