"""Roster replicas on real Postgres and NATS, each test on its own database and namespace."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager

import pytest

from pinecall_roster.app import create_app
from pinecall_roster.settings import RosterSettings
from pinecall_testkit.roster import Keys, Replica, make_keys, running


@pytest.fixture
def roster_settings(database_url: str, nats_url: str, nats_namespace: str) -> RosterSettings:
    return RosterSettings.from_env(
        {},
        database_url=database_url,
        nats_url=nats_url,
        nats_namespace=nats_namespace,
        log_format="text",
    )


@pytest.fixture
def replica(roster_settings: RosterSettings) -> Callable[[], AbstractAsyncContextManager[Replica]]:
    """Start a roster replica (as many as a test wants) on the test's database and NATS."""
    return lambda: running(create_app(roster_settings))


@pytest.fixture
async def roster(
    replica: Callable[[], AbstractAsyncContextManager[Replica]],
) -> AsyncIterator[Replica]:
    async with replica() as client:
        yield client


@pytest.fixture
async def keys(database_url: str) -> Keys:
    return await make_keys(database_url)
