"""Postgres cutting every connection mid-load, as a restart of Postgres does (issue 5,
acceptance 2): the writers' retries land, once.

The shared Postgres of this machine cannot be restarted under other engineers' tests, so the
test terminates every backend of its own database (``pg_terminate_backend``) while batches are in
flight: each replica sees what a restart shows it (connections lost, open transactions rolled
back, a commit whose answer never came) and answers 503 until it reconnects; the writers retry.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

import psycopg

from pinecall_clients.calllog import Backoff, CallLogClient, CallLogWriter
from pinecall_contracts.calls import CallOpen
from pinecall_testkit.call_log import Keys, Replica, bearer
from pinecall_testkit.faults import FaultyTransport, a_batch_waits_on_a_lock

Start = Callable[[], AbstractAsyncContextManager[Replica]]


async def cut_every_connection(database_url: str) -> int:
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        cursor = await conn.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        row = await cursor.fetchone()
    return int(row[0]) if row else 0


async def test_writers_retries_land_once_when_postgres_cuts_every_connection_mid_load(
    replica: Start, keys: Keys, database_url: str
) -> None:
    async with replica() as a, replica() as b:
        transport = FaultyTransport([a.app, b.app])
        backoff = Backoff(first=0.01, most=0.05, jitter=0.0)
        async with CallLogClient(
            "http://call-log.test", keys.production, transport=transport, backoff=backoff
        ) as log:
            writers: list[CallLogWriter] = []
            for i in range(8):
                call = f"call_{i}"
                await log.open(
                    CallOpen(
                        call=call,
                        agent="support-bot",
                        org="org_acme",
                        environment="production",
                        room=f"room-{i}",
                        worker="pinecall/worker-a.1791067258",
                    )
                )
                writers.append(log.writer(call))
            cuts = 0
            for round_ in range(10):
                for writer in writers:
                    for k in range(3):
                        writer.add("transcript.user", {"n": round_ * 3 + k})
                if round_ in (3, 6):
                    # call_0's batch is caught inside its transaction when every connection goes
                    held = await psycopg.AsyncConnection.connect(database_url)
                    await held.execute(
                        "SELECT 1 FROM calllog.calls WHERE call_id = 'call_0' FOR UPDATE"
                    )
                    flushes = [asyncio.create_task(writer.flush()) for writer in writers]
                    await a_batch_waits_on_a_lock(database_url, held)
                    cuts += await cut_every_connection(database_url)
                    await asyncio.gather(*flushes)
                    await held.close()
                else:
                    await asyncio.gather(*[writer.flush() for writer in writers])
            assert cuts > 0, "no connection was cut: the test tested nothing"
            assert all(writer.written == 30 and not writer.refused for writer in writers)
        call_0 = [p for _, p, _ in transport.sent if p == "/v1/calls/call_0/entries"]
        assert len(call_0) > 10, "call_0's cut batches were not retried"
        for i in range(8):
            log_ = (
                await a.get(f"/v1/calls/call_{i}/entries", headers=bearer(keys.operator))
            ).json()
            counted = [e["data"]["n"] for e in log_["entries"] if e["counted"] is not None]
            assert counted == list(range(30))
