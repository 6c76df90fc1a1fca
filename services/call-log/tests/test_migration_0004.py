"""Migration 0004 (the agents' versions) runs on a database at 0003 holding calls: expand only,
the previous release's rows untouched, the new table taking versions at once."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterator

import psycopg
import pytest
import sqlalchemy as sa

from pinecall_call_log.store import Store, migrate
from pinecall_call_log.store.tables import CALLS
from pinecall_contracts.agents import AgentDefinition
from pinecall_servicekit import db
from pinecall_servicekit.dburl import with_database
from pinecall_servicekit.platform import Endpoints


@pytest.fixture
def empty_database(platform_endpoints: Endpoints) -> Iterator[str]:
    """A database of this test's own that no migration ran on."""
    admin = platform_endpoints.database_url
    name = f"pc_m_{secrets.token_hex(5)}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield with_database(admin, name)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def test_0004_migrates_up_from_0003_keeping_its_calls(empty_database: str) -> None:
    await asyncio.to_thread(
        db.migrate, empty_database, migrate.script_location, migrate.schema, "0003"
    )
    engine = db.create_engine(empty_database, pool_size=1)
    try:
        call = {
            "call_id": "call_1", "agent": "support-bot", "org": "org_acme",
            "environment": "production", "room": "room-1", "worker": "pinecall/w.1",
            "context": {}, "config": {}, "opened_at": db.utcnow(),
        }  # fmt: skip
        async with engine.begin() as conn:
            await conn.execute(sa.insert(CALLS).values(**call))
        assert (await migrate.status(engine)).standing == "behind"
        await asyncio.to_thread(migrate, empty_database)
        status = await migrate.status(engine)
        assert (status.standing, status.applied) == ("at_head", ["0005"])
        async with engine.connect() as conn:
            kept = (await conn.execute(sa.select(CALLS.c.call_id, CALLS.c.org))).all()
        assert [tuple(r) for r in kept] == [("call_1", "org_acme")]
        store = Store(engine).definitions
        put = AgentDefinition(name="support-bot", prompt="Be brief.")
        version, wrote = await store.put("org_acme", "production", put, "0" * 64, db.utcnow())
        assert (version.version, wrote) == (1, True)
        assert await store.get("org_acme", "production", "support-bot") == version
    finally:
        await engine.dispose()
