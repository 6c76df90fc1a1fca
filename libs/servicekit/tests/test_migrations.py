"""Where a database stands against a service's migrations: at head, behind, ahead or never."""

from __future__ import annotations

from collections.abc import AsyncIterator
from importlib.metadata import entry_points

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from pinecall_servicekit import db
from pinecall_servicekit.migrations import Migrations


@pytest.fixture
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    engine = db.create_engine(database_url, pool_size=1)
    yield engine
    await engine.dispose()


def installed() -> dict[str, Migrations]:
    found = {ep.name: ep.load() for ep in entry_points(group="pinecall_runtime.migrations")}
    assert all(isinstance(m, Migrations) for m in found.values())
    return found


async def test_every_installed_service_is_at_head_on_a_migrated_database(
    engine: AsyncEngine,
) -> None:
    statuses = [await m.status(engine) for m in installed().values()]
    assert statuses
    assert {s.standing for s in statuses} == {"at_head"}
    assert all(s.applied == s.heads for s in statuses)


@pytest.mark.parametrize(
    ("change", "standing"),
    [
        ("UPDATE {schema}.alembic_version SET version_num = '0001'", "behind"),
        ("UPDATE {schema}.alembic_version SET version_num = 'f00d'", "ahead"),
        ("DROP TABLE {schema}.alembic_version", "never"),
    ],
)
async def test_a_database_not_at_head_says_how(
    engine: AsyncEngine, change: str, standing: str
) -> None:
    migrations = installed()["call-log"]  # three revisions: it can be behind
    async with engine.begin() as conn:
        await conn.execute(sa.text(change.format(schema=migrations.schema)))
    status = await migrations.status(engine)
    assert status.standing == standing
    assert status.heads == ["0005"]
