"""A call's head made and ended, each in one statement on psycopg itself (issue 20).

A new call's head and its ``call.started`` are :data:`OPEN_CALL`; a call's end and seal, after
its head is locked (:func:`.head.lock_driver_head`), are :data:`END_AT_HEAD`. Through
SQLAlchemy each was a transaction of three or four statements, and an open, a tool call and an
end were most of a replica's CPU under ``load`` once the batches went in one request.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

import psycopg
import sqlalchemy as sa
from psycopg.rows import namedtuple_row

from pinecall_call_log.store.head import json_text
from pinecall_call_log.store.tables import CALLS, ENTRIES
from pinecall_contracts.calls import CallOpen
from pinecall_servicekit import db

HEAD_COLUMNS = ", ".join(c.name for c in CALLS.c)
"""The head's columns, named: a statement of ``*`` that psycopg has prepared (its fifth run on a
connection) fails with "cached plan must not change result type" once a migration adds a column,
on every connection that prepared it, until it is made anew (a probe: every open a 500 after an
``ALTER TABLE … ADD COLUMN``, which a release's expand step is)."""

OPEN_CALL = db.driver_sql(
    sa.text(
        f"""
    WITH made AS (
        INSERT INTO {CALLS.fullname} (call_id, agent, org, environment, room, worker, context,
                                      config, prompt_hash, channel, opened_at, last_seq)
        VALUES (:call, :agent, :org, :environment, :room, :worker, CAST(:context AS jsonb),
                CAST(:config AS jsonb), :prompt_hash, :channel, :now, 1)
        ON CONFLICT DO NOTHING
        RETURNING {HEAD_COLUMNS}
    ), started AS (
        INSERT INTO {ENTRIES.fullname} (call_id, seq, kind, ts, data)
        SELECT made.call_id, 1, 'call.started', :now, CAST(:started AS jsonb) FROM made
    )
    SELECT {HEAD_COLUMNS} FROM made
    """
    )
)
"""A new call's head and its ``call.started`` (seq 1) in one statement; the head's row is the one
row. None when the call is held already (``ON CONFLICT`` waits for a head being made): then
nothing was written, and the open is judged under the head's lock. Run in a transaction of its
own, never in autocommit: an open waiting on another's insert of the call when its replica dies
must die with it, not commit later, when no one announces the call (the ``opened`` event, the
app socket's): its retry would find it opened and announce nothing (a probe's SIGKILL)."""

END_AT_HEAD = db.driver_sql(
    sa.text(
        f"""
    WITH own AS (
        INSERT INTO {ENTRIES.fullname} (call_id, seq, kind, ts, data)
        SELECT :call, :after + e.i, e.kind, e.ts, CAST(e.data AS jsonb)
        FROM unnest(CAST(:kinds AS text[]), CAST(:ts AS timestamptz[]), CAST(:data AS text[]))
             WITH ORDINALITY AS e(kind, ts, data, i)
    )
    UPDATE {CALLS.fullname}
    SET last_seq = :after + cardinality(CAST(:kinds AS text[])),
        ended_at = CASE WHEN :ending THEN CAST(:ended_at AS timestamptz) ELSE ended_at END,
        outcome = CASE WHEN :ending THEN CAST(:outcome AS text) ELSE outcome END,
        cause = CASE WHEN :ending THEN CAST(:cause AS text) ELSE cause END,
        sealed_at = CASE WHEN :sealing THEN CAST(:now AS timestamptz) ELSE sealed_at END
    WHERE call_id = :call
    RETURNING {HEAD_COLUMNS}
    """
    )
)
"""The service's own entries of a call's end (``call.ended``, ``call.sealed``) after the head,
locked by :data:`LOCK_HEAD` in the same transaction, and the head moved past them with the end
and seal it records, in one statement (:func:`append_own_all`'s, for ``CallStore.end``)."""


def started_data(o: CallOpen, started: dict[str, Any]) -> dict[str, Any]:
    """``call.started``'s data: the worker, room and agent, ``started`` (the agent's version and
    prompt hash), and the channel when there is one."""
    data = {"worker": o.worker, "room": o.room, "agent": o.agent} | started
    if o.channel is not None:
        data["channel"] = o.channel
    return data


async def open_head(
    pg: psycopg.AsyncConnection[Any],
    o: CallOpen,
    config: dict[str, Any],
    prompt_hash: str | None,
    started: dict[str, Any],
    now: dt.datetime,
) -> Any | None:
    """:data:`OPEN_CALL` on ``pg``: the new call's head (a named tuple) with ``config`` and
    ``prompt_hash`` as the call keeps them and ``started`` as its ``call.started``'s data; None
    when the call is held already (nothing written)."""
    async with pg.cursor(row_factory=namedtuple_row) as cursor:
        await cursor.execute(
            OPEN_CALL,
            {
                "call": o.call,
                "agent": o.agent,
                "org": o.org,
                "environment": o.environment,
                "room": o.room,
                "worker": o.worker,
                "context": json_text(o.context),
                "config": json_text(config),
                "prompt_hash": prompt_hash,
                "channel": o.channel,
                "now": now,
                "started": json_text(started),
            },
        )
        return await cursor.fetchone()


async def end_at_head(
    pg: psycopg.AsyncConnection[Any],
    head: Any,
    own: Sequence[tuple[str, dict[str, Any]]],
    now: dt.datetime,
    *,
    stamped: Mapping[str, dt.datetime],
    changes: Mapping[str, Any],
) -> Any:
    """:data:`END_AT_HEAD` in ``pg``'s transaction: ``own`` (kind, data) after ``head`` (locked
    by :func:`lock_driver_head`), each stamped ``now`` or its kind's time in ``stamped``, and the
    head moved past them with ``changes`` (``ended_at``, ``outcome`` and ``cause`` together;
    ``sealed_at``). Returns the head as it stands now, a named tuple."""
    ending = "ended_at" in changes
    async with pg.cursor(row_factory=namedtuple_row) as cursor:
        await cursor.execute(
            END_AT_HEAD,
            {
                "call": head.call_id,
                "after": head.last_seq,
                "kinds": [kind for kind, _ in own],
                "ts": [stamped.get(kind, now) for kind, _ in own],
                "data": [json_text(data) for _, data in own],
                "ending": ending,
                "ended_at": changes.get("ended_at"),
                "outcome": changes.get("outcome"),
                "cause": changes.get("cause"),
                "sealing": "sealed_at" in changes,
                "now": changes.get("sealed_at", now),
            },
        )
        return await cursor.fetchone()
