"""The reaper against the LiveKit stand-in and a call-log replica on real Postgres and NATS
(the call-log started whole by its test kit: the reaper's tests import nothing of the call-log)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping

import httpx
import pytest

from pinecall_clients.calllog import Backoff, CallLogClient
from pinecall_clients.livekit import LiveKitAccess
from pinecall_loadlab.livekit import StandIn
from pinecall_loadlab.livekit.testing import *  # noqa: F403  (the stand-in's fixtures)
from pinecall_loadlab.livekit.testing import API_KEY, API_SECRET
from pinecall_reaper.domain import Rules
from pinecall_reaper.reaper import LiveKits, Reaper
from pinecall_testkit.call_log import Keys, Replica, make_keys, replica_on


@pytest.fixture
async def keys(database_url: str) -> Keys:
    return await make_keys(database_url)


@pytest.fixture
async def call_log(database_url: str, nats_url: str, nats_namespace: str) -> AsyncIterator[Replica]:
    async with replica_on(database_url, nats_url, nats_namespace, db_pool_size=4) as client:
        yield client


def log_client(call_log: Replica, key: str) -> CallLogClient:
    """A call-log client of the in-process replica (over ASGI), quick to give up."""
    return CallLogClient(
        "http://call-log.test",
        key,
        transport=httpx.ASGITransport(app=call_log.app),  # type: ignore[arg-type]
        backoff=Backoff(first=0.01, most=0.05, jitter=0.0),
    )


def on(livekits: Mapping[str, LiveKitAccess]) -> LiveKits:
    """Environments on fixed LiveKits (the app resolves them at each reap)."""

    async def fixed() -> Mapping[str, LiveKitAccess]:
        return livekits

    return fixed


@pytest.fixture
async def reaper(call_log: Replica, keys: Keys, standin: StandIn) -> AsyncIterator[Reaper]:
    """A reaper of production on the stand-in, with the seeds' rules."""
    async with log_client(call_log, keys.service) as log:
        livekit = LiveKitAccess(url=standin.url, api_key=API_KEY, api_secret=API_SECRET)
        r = Reaper(log, on({"production": livekit}), Rules())
        yield r
        await r.aclose()
