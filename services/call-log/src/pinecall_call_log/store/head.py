"""A call's head row: what the call is and where its log stands, locked by every change.

Shared by :mod:`.calls` and :mod:`.agents`; the SQL of the head and of writing entries after it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from pinecall_call_log import domain
from pinecall_call_log.store.tables import CALLS, ENTRIES
from pinecall_contracts.calls import BatchWritten, CallRecord, Entry
from pinecall_servicekit.errors import Conflict, NotFound

Head = sa.Row[Any]


def record_of(row: sa.Row[Any]) -> CallRecord:
    """A ``calls`` row as a :class:`CallRecord`."""
    return CallRecord(
        call=row.call_id,
        agent=row.agent,
        org=row.org,
        environment=row.environment,
        room=row.room,
        worker=row.worker,
        state=domain.state_of(row.ended_at is not None, row.sealed_at is not None),
        written=row.written,
        last_seq=row.last_seq,
        outcome=row.outcome,
        opened_at=row.opened_at,
        ended_at=row.ended_at,
        sealed_at=row.sealed_at,
        reopened=row.reopened,
        prompt_hash=row.prompt_hash,
    )


async def lock_head(conn: AsyncConnection, call: str, *, changing: bool = True) -> Head:
    """The call's head row, locked until the transaction ends.

    Raises ``NotFound`` for a call this log does not hold, and ``Conflict`` for a sealed call
    when ``changing`` (a sealed call is 409 at every endpoint that would change it).
    """
    row = (
        await conn.execute(sa.select(CALLS).where(CALLS.c.call_id == call).with_for_update())
    ).first()
    if row is None:
        raise NotFound(f"no call {call} on this log (an older release's call: say it reopened)")
    if changing and row.sealed_at is not None:
        raise Conflict(f"call {call} is sealed")
    return row


async def append_own(
    conn: AsyncConnection, head: Head, kind: str, data: dict[str, Any], now: dt.datetime
) -> int:
    """Write one of the service's own entries after ``head`` (locked): it takes a seq and is not
    counted. Returns its seq; the head's ``last_seq`` is moved on."""
    seq = int(head.last_seq) + 1
    await conn.execute(
        sa.insert(ENTRIES).values(call_id=head.call_id, seq=seq, kind=kind, ts=now, data=data)
    )
    await conn.execute(sa.update(CALLS).where(CALLS.c.call_id == head.call_id).values(last_seq=seq))
    return seq


async def insert_entries(
    conn: AsyncConnection,
    call: str,
    after: int,
    first: int,
    entries: Sequence[Entry],
    digests: Sequence[bytes],
    now: dt.datetime,
) -> BatchWritten:
    """Write ``entries`` at the writer's places ``after…`` under seqs ``first…`` (the head
    already moved past them in this transaction)."""
    seqs = list(range(first, first + len(entries)))
    await conn.execute(
        sa.insert(ENTRIES),
        [
            {
                "call_id": call,
                "seq": seq,
                "counted": after + i,
                "kind": e.kind,
                "ts": domain.clamp(e.ts, now),
                "data": e.data,
                "digest": d,
            }
            for i, (seq, e, d) in enumerate(zip(seqs, entries, digests, strict=True))
        ],
    )
    return BatchWritten(seqs=seqs, written=after + len(entries))
