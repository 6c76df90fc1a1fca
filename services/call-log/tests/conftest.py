"""Call-log replicas on real Postgres and NATS, each test on its own database and namespace."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager

import pytest

from pinecall_call_log.app import create_app
from pinecall_call_log.settings import CallLogSettings
from pinecall_testkit import appsocket
from pinecall_testkit.appsocket import Serve
from pinecall_testkit.call_log import Keys, Listening, Replica, make_keys, running


@pytest.fixture
def call_log_settings(database_url: str, nats_url: str, nats_namespace: str) -> CallLogSettings:
    return appsocket.call_log_settings(database_url, nats_url, nats_namespace)


@pytest.fixture
def serve(call_log_settings: CallLogSettings) -> Serve:
    """Start a replica served on a real port (a WebSocket client dials it); ``overrides``: its
    other settings."""
    return appsocket.serving(call_log_settings)


@pytest.fixture
def replica(
    call_log_settings: CallLogSettings,
) -> Callable[[], AbstractAsyncContextManager[Replica]]:
    """Start a call-log replica (as many as a test wants) on the test's database and NATS."""
    return lambda: running(create_app(call_log_settings))


@pytest.fixture
async def call_log(
    replica: Callable[[], AbstractAsyncContextManager[Replica]],
) -> AsyncIterator[Replica]:
    async with replica() as client:
        yield client


@pytest.fixture
async def keys(database_url: str) -> Keys:
    return await make_keys(database_url)


@pytest.fixture
async def socket_replica(serve: Serve, keys: Keys) -> AsyncIterator[Listening]:
    """A replica served on a real port (an app socket dials it), the test org's support-bot
    defined in it."""
    async with serve() as one:
        await appsocket.define(one, keys)
        yield one
