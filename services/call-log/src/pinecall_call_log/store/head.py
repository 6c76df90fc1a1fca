"""A call's head row: what the call is and where its log stands, locked by every change.

Shared by :mod:`.calls`, :mod:`.tools` and :mod:`.lifecycle`; the SQL of the head and of writing
entries after it.
:data:`WRITE_AT_HEAD` is a batch's common case in one statement: it moves the head only if it
stands at the batch's count and writes the entries under the places it took, or, when the head
stands elsewhere, changes nothing.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

import msgspec
import psycopg
import sqlalchemy as sa
from psycopg.rows import namedtuple_row
from sqlalchemy.ext.asyncio import AsyncConnection

from pinecall_call_log import domain
from pinecall_call_log.store.tables import CALLS, ENTRIES
from pinecall_contracts.calls import BatchWritten, CallBatch, CallRecord, Entry
from pinecall_servicekit import db
from pinecall_servicekit.errors import Conflict, NotFound

Head = sa.Row[Any]
R = TypeVar("R")


def json_text(value: Any) -> str:
    """``value`` as the JSON text a ``CAST(… AS jsonb)`` takes: msgspec's encoding, as
    SQLAlchemy's ``JSONB`` stores it (``None`` is JSON ``null``)."""
    return msgspec.json.encode(value).decode()


WRITE_AT_HEAD = db.driver_sql(
    sa.text(
        f"""
    WITH moved AS (
        UPDATE {CALLS.fullname} SET written = written + :size, last_seq = last_seq + :size
        WHERE call_id = :call AND written = :after AND sealed_at IS NULL
        RETURNING last_seq
    ), written AS (
        INSERT INTO {ENTRIES.fullname} (call_id, seq, counted, kind, ts, data, digest)
        SELECT :call, moved.last_seq - :size + e.i, :after + e.i - 1,
               e.kind, e.ts, e.data::jsonb, e.digest
        FROM moved, unnest(
            CAST(:kinds AS text[]), CAST(:ts AS timestamptz[]),
            CAST(:data AS text[]), CAST(:digests AS bytea[])
        ) WITH ORDINALITY AS e(kind, ts, data, digest, i)
    )
    SELECT last_seq FROM moved
    """
    )
)
"""The head moves on by the batch's size if it stands at ``after`` and the call is not sealed (an
UPDATE at READ COMMITTED waits for the row and re-reads its newest version), and the entries take
the seqs it moved past; no row when the head stands elsewhere (then nothing was written). Run on
psycopg itself (:func:`~pinecall_servicekit.db.driver_transaction`): the hot path of every
writer's batch."""


LOCK_HEADS = db.driver_sql(
    sa.text(
        f"""
    SELECT call_id FROM {CALLS.fullname}
    WHERE call_id = ANY(CAST(:calls AS text[])) ORDER BY call_id FOR UPDATE
    """
    )
)
"""The heads of ``:calls`` locked in the order of their ids, before :data:`WRITE_AT_HEADS` in the
same transaction: its update locks them in whatever order its plan meets the batches, and two
requests naming the same calls in two orders deadlocked (a probe: 15 of 30 rounds at the SQL,
a 1 s stall and every batch 503 over HTTP). Locked in one order, they queue."""


WRITE_AT_HEADS = db.driver_sql(
    sa.text(
        f"""
    WITH batch AS (
        SELECT b.part, b.value->>'call' AS call_id, (b.value->>'after')::integer AS after,
               jsonb_array_length(b.value->'entries') AS size, b.value->'entries' AS entries,
               (sum(jsonb_array_length(b.value->'entries')) OVER (ORDER BY b.part)
                - jsonb_array_length(b.value->'entries'))::integer AS before
        FROM jsonb_array_elements(CAST(:batches AS jsonb)) WITH ORDINALITY AS b(value, part)
    ), moved AS (
        UPDATE {CALLS.fullname} AS c
        SET written = c.written + batch.size, last_seq = c.last_seq + batch.size
        FROM batch
        WHERE c.call_id = batch.call_id AND c.written = batch.after AND c.sealed_at IS NULL
        RETURNING batch.part, c.call_id, c.last_seq, batch.size, batch.after, batch.entries,
                  batch.before
    ), written AS (
        INSERT INTO {ENTRIES.fullname} (call_id, seq, counted, kind, ts, data, digest)
        SELECT moved.call_id, moved.last_seq - moved.size + e.i, moved.after + e.i - 1,
               e.value->>'kind',
               GREATEST(LEAST((e.value->>'ts')::timestamptz, CAST(:now AS timestamptz)),
                        CAST(:earliest AS timestamptz)),
               COALESCE(e.value->'data', '{{}}'::jsonb),
               substring(CAST(:digests AS bytea) FROM (moved.before + e.i::integer - 1) * 16 + 1
                         FOR 16)
        FROM moved, jsonb_array_elements(moved.entries) WITH ORDINALITY AS e(value, i)
    )
    SELECT part, last_seq FROM moved
    """
    )
)
""":data:`WRITE_AT_HEAD` for several calls' batches in one statement (``POST /v1/entries``):
each call's head moves on by its batch's size if it stands at the batch's ``after``, and that
batch's entries take the seqs it moved past, their ``ts`` clamped as :func:`domain.clamp` does.
A row ``(part, last_seq)`` for each batch written (``part`` its place in ``:batches``, from 1);
none for a batch not written. Two batches of one call in a statement: the head is moved once, by
the batch its count matches (the other is judged after, alone).

The batches go as one JSON document (``:batches``, the :class:`CallBatch` list as msgspec
encodes it) and their entries' digests as one ``bytea`` of 16 bytes each, in order: psycopg then
dumps two values, not four arrays of an element an entry (per-batch arrays were a fifth of a
replica's samples under load, their elements' dumping still a tenth in one statement; issue 20).
"""


LOCK_HEAD = db.driver_sql(
    sa.select(CALLS).where(CALLS.c.call_id == sa.bindparam("call")).with_for_update()
)
""":func:`lock_head` on psycopg itself."""


def at_heads_parameters(
    batches: Sequence[CallBatch], digests: Sequence[Sequence[bytes]], now: dt.datetime
) -> dict[str, Any]:
    """:data:`WRITE_AT_HEADS`'s parameters for ``batches`` (each with entries) and their
    entries' ``digests`` (:func:`domain.digest`, 16 bytes each)."""
    return {
        "batches": json_text(batches),
        "digests": b"".join(d for said in digests for d in said),
        "now": now,
        "earliest": domain.EARLIEST,
    }


def record_of(row: Any) -> CallRecord:
    """A ``calls`` row (SQLAlchemy's row or psycopg's named tuple) as a :class:`CallRecord`."""
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
        cause=row.cause,
        opened_at=row.opened_at,
        ended_at=row.ended_at,
        sealed_at=row.sealed_at,
        reopened=row.reopened,
        prompt_hash=row.prompt_hash,
        config=row.config,
        channel=row.channel,
        context=row.context or {},
    )


async def lock_head(conn: AsyncConnection, call: str, *, changing: bool = True) -> Head:
    """The call's head row, locked until the transaction ends.

    Raises ``NotFound`` for a call this log does not hold, and ``Conflict`` for a sealed call
    when ``changing`` (a sealed call is 409 at every endpoint that would change it).
    """
    row = (
        await conn.execute(sa.select(CALLS).where(CALLS.c.call_id == call).with_for_update())
    ).first()
    return _held(call, row, changing)


async def lock_driver_head(
    pg: psycopg.AsyncConnection[Any], call: str, *, changing: bool = True
) -> Any:
    """:func:`lock_head` in psycopg's transaction ``pg``: the row as a named tuple."""
    async with pg.cursor(row_factory=namedtuple_row) as cursor:
        await cursor.execute(LOCK_HEAD, {"call": call})
        row = await cursor.fetchone()
    return _held(call, row, changing)


def _held(call: str, row: R | None, changing: bool) -> R:
    if row is None:
        raise NotFound(f"no call {call} on this log (an older release's call: say it reopened)")
    head: Any = row  # SQLAlchemy's row or psycopg's named tuple: the columns are attributes
    if changing and head.sealed_at is not None:
        raise Conflict(f"call {call} is sealed")
    return row


async def append_own(
    conn: AsyncConnection, head: Head, kind: str, data: dict[str, Any], now: dt.datetime
) -> int:
    """Write one of the service's own entries after ``head`` (locked): it takes a seq and is not
    counted. Returns its seq; the head's ``last_seq`` is moved on."""
    return int((await append_own_all(conn, head, [(kind, data)], now)).last_seq)


async def append_own_all(
    conn: AsyncConnection,
    head: Head,
    own: Sequence[tuple[str, dict[str, Any]]],
    now: dt.datetime,
    *,
    stamped: Mapping[str, dt.datetime] | None = None,
    **changes: Any,
) -> Head:
    """Write the service's own entries ``own`` (kind, data) after ``head`` (locked), each taking
    the next seq, none counted, stamped ``now`` (or its kind's time in ``stamped``), and move the
    head past them, setting ``changes`` on it in the same statement. Returns the head as it
    stands now (two statements, whatever the number of entries)."""
    first = int(head.last_seq) + 1
    stamped = stamped or {}
    await conn.execute(
        sa.insert(ENTRIES),
        [
            {
                "call_id": head.call_id,
                "seq": first + i,
                "kind": kind,
                "ts": stamped.get(kind, now),
                "data": data,
            }
            for i, (kind, data) in enumerate(own)
        ],
    )
    moved = (
        sa.update(CALLS)
        .where(CALLS.c.call_id == head.call_id)
        .values(last_seq=first + len(own) - 1, **changes)
        .returning(*CALLS.c)
    )
    return (await conn.execute(moved)).one()


async def write_at_head(
    pg: psycopg.AsyncConnection[Any],
    call: str,
    after: int,
    entries: Sequence[Entry],
    digests: Sequence[bytes],
    now: dt.datetime,
) -> BatchWritten | None:
    """A batch written whole at the head by :data:`WRITE_AT_HEAD` in ``pg``'s transaction, or
    None if the head did not stand at ``after`` (or the call is unknown or sealed) and nothing was
    written. ``entries`` is not empty."""
    row = await (
        await pg.execute(
            WRITE_AT_HEAD,
            {
                "call": call,
                "after": after,
                "size": len(entries),
                "kinds": [e.kind for e in entries],
                "ts": [domain.clamp(e.ts, now) for e in entries],
                "data": [json_text(e.data) for e in entries],
                "digests": list(digests),
            },
        )
    ).fetchone()
    if row is None:
        return None
    first = int(row[0]) - len(entries) + 1
    return BatchWritten(seqs=list(range(first, first + len(entries))), written=after + len(entries))


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
