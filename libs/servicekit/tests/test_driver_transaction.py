"""psycopg's own connection lent by SQLAlchemy's pool (``db.driver_connection``) and a
transaction on it (``db.driver_transaction``), issue 20: a transaction commits or rolls back
whole, on the autocommit engine each statement commits alone, errors are the platform's, and a
connection left unusable is never lent again."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import psycopg
import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from pinecall_servicekit import db
from pinecall_servicekit.errors import StoreUnavailable, Unprocessable

TABLE = "driver_probe"


@pytest.fixture
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    engine = db.create_engine(database_url, pool_size=1, max_overflow=0, pre_ping=False)
    async with engine.begin() as conn:
        await conn.execute(sa.text(f"CREATE TABLE {TABLE} (k text PRIMARY KEY, v jsonb)"))
    yield engine
    await engine.dispose()


async def keys(engine: AsyncEngine) -> list[str]:
    async with engine.connect() as conn:
        return list((await conn.execute(sa.text(f"SELECT k FROM {TABLE} ORDER BY k"))).scalars())


async def backend(engine: AsyncEngine) -> int:
    async with engine.connect() as conn:
        return int((await conn.execute(sa.text("SELECT pg_backend_pid()"))).scalar_one())


async def test_its_statements_commit_together_and_a_raise_takes_them_all_back(
    engine: AsyncEngine,
) -> None:
    async with db.driver_transaction(engine) as pg:
        await pg.execute(f"INSERT INTO {TABLE} (k) VALUES (%(k)s)", {"k": "a"})
        await pg.execute(f"INSERT INTO {TABLE} (k) VALUES (%(k)s)", {"k": "b"})

    async def raising() -> None:
        async with db.driver_transaction(engine) as pg:
            await pg.execute(f"INSERT INTO {TABLE} (k) VALUES (%(k)s)", {"k": "c"})
            raise RuntimeError("the caller's own error")

    with pytest.raises(RuntimeError):
        await raising()
    assert await keys(engine) == ["a", "b"]
    # the pool's one connection went back idle and serves SQLAlchemy's statements as before
    async with engine.connect() as conn:
        status = (await conn.get_raw_connection()).driver_connection.info.transaction_status
        assert status == psycopg.pq.TransactionStatus.IDLE


async def test_what_postgres_cannot_store_is_unprocessable_and_nothing_is_written(
    engine: AsyncEngine,
) -> None:

    async def storing() -> None:
        async with db.translate_errors("writing a probe"), db.driver_transaction(engine) as pg:
            await pg.execute(f"INSERT INTO {TABLE} (k) VALUES ('kept')")
            await pg.execute(f"INSERT INTO {TABLE} (k) VALUES (%(k)s)", {"k": "nul\x00here"})

    with pytest.raises(Unprocessable, match="Postgres cannot store it"):
        await storing()
    assert await keys(engine) == []


async def test_a_database_never_migrated_is_unavailable_naming_the_migration(
    engine: AsyncEngine,
) -> None:
    with pytest.raises(StoreUnavailable, match="never migrated"):
        async with db.translate_errors("reading a probe"), db.driver_transaction(engine) as pg:
            await pg.execute("SELECT * FROM no_such_table")


async def test_a_connection_cut_mid_transaction_is_unavailable_and_never_lent_again(
    engine: AsyncEngine, database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    cut = await backend(engine)

    async def cut_midway() -> None:
        async with db.translate_errors("writing a probe"), db.driver_transaction(engine) as pg:
            await pg.execute(f"INSERT INTO {TABLE} (k) VALUES ('lost')")
            async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as o:
                await o.execute("SELECT pg_terminate_backend(%s)", [cut])
            await pg.execute(f"INSERT INTO {TABLE} (k) VALUES ('after')")

    with pytest.raises(StoreUnavailable, match="did not answer"):
        await cut_midway()
    # the pool made a new connection (pre-ping is off: it was invalidated, not found dead)
    assert await backend(engine) != cut
    assert await keys(engine) == []
    # invalidated before the pool's reset tried the dead connection (it logs an ERROR then)
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []


async def test_a_transaction_cancelled_mid_statement_leaves_no_connection_in_it(
    engine: AsyncEngine,
) -> None:
    started = asyncio.Event()

    async def held() -> None:
        async with db.driver_transaction(engine) as pg:
            await pg.execute(f"INSERT INTO {TABLE} (k) VALUES ('cancelled')")
            started.set()
            await pg.execute("SELECT pg_sleep(30)")

    task = asyncio.create_task(held())
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await keys(engine) == []
    async with db.driver_transaction(engine) as pg:
        await pg.execute(f"INSERT INTO {TABLE} (k) VALUES ('next')")
    assert await keys(engine) == ["next"]


async def test_on_the_autocommit_engine_each_statement_commits_alone_and_the_pool_gets_it_back(
    engine: AsyncEngine,
) -> None:
    async def failing_second() -> None:
        async with db.driver_connection(db.autocommit(engine)) as pg:
            await pg.execute(f"INSERT INTO {TABLE} (k) VALUES ('first')")
            await pg.execute(f"INSERT INTO {TABLE} (k) VALUES ('first')")  # the key again

    with pytest.raises(psycopg.errors.UniqueViolation):
        await failing_second()
    assert await keys(engine) == ["first"]  # committed by itself, not taken back with the second
    # the pool's connection went back out of autocommit: the engine's own transactions hold
    async with engine.connect() as conn:
        assert not (await conn.get_raw_connection()).driver_connection.autocommit


async def test_a_restart_of_postgres_fails_one_request_not_one_a_pooled_connection(
    database_url: str,
) -> None:
    engine = db.create_engine(database_url, pool_size=4, max_overflow=0, pre_ping=False)
    try:
        held = [await engine.connect() for _ in range(4)]  # four connections made, then pooled
        for conn in held:
            await conn.execute(sa.text("SELECT 1"))
            await conn.close()
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as o:
            await o.execute(  # what a restart does to them
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        answered: list[bool] = []
        for _ in range(6):
            try:
                async with (
                    db.translate_errors("probing"),
                    db.driver_connection(db.autocommit(engine)) as pg,
                ):
                    await pg.execute("SELECT 1")
                answered.append(True)
            except StoreUnavailable:
                answered.append(False)
        assert answered == [False, True, True, True, True, True]
    finally:
        await engine.dispose()
