"""The worker against the LiveKit stand-in and a real roster on real Postgres and NATS."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from pinecall_loadlab.livekit.testing import *  # noqa: F403  (the stand-in's fixtures)
from pinecall_roster.app import create_app
from pinecall_roster.settings import RosterSettings
from pinecall_roster.store import Store
from pinecall_roster.testing import Keys, Replica, running
from pinecall_servicekit import db


@pytest.fixture
async def roster(database_url: str, nats_url: str, nats_namespace: str) -> AsyncIterator[Replica]:
    settings = RosterSettings.from_env(
        {},
        database_url=database_url,
        nats_url=nats_url,
        nats_namespace=nats_namespace,
        log_format="text",
    )
    async with running(create_app(settings)) as client:
        yield client


@pytest.fixture
async def keys(database_url: str) -> Keys:
    engine = db.create_engine(database_url, pool_size=1)
    store = Store(engine)
    try:
        operator = await store.create_key("operator", "test", None)
        production = await store.create_key("fleet", "workers", "production")
        sandbox = await store.create_key("fleet", "workers", "sandbox")
        app = await store.create_key("app", "an app", "production")
    finally:
        await engine.dispose()
    return Keys(operator.secret, production.secret, sandbox.secret, app.secret, production.key.id)
