"""The worker against the LiveKit stand-in and a real roster on real Postgres and NATS."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from pinecall_loadlab.livekit.testing import *  # noqa: F403  (the stand-in's fixtures)
from pinecall_loadlab.vendors.testing import *  # noqa: F403  (the vendor fakes)
from pinecall_roster.app import create_app
from pinecall_roster.settings import RosterSettings
from pinecall_roster.testing import Keys, Replica, make_keys, running


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
    return await make_keys(database_url)
