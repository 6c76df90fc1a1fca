"""webhook-ingest on real NATS; the LiveKit stand-in's own webhooks for the end-to-end test."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from pinecall_loadlab.livekit.testing import *  # noqa: F403  (the stand-in's fixtures)
from pinecall_loadlab.livekit.testing import API_KEY, API_SECRET
from pinecall_servicekit.testing.apps import Replica, running
from pinecall_testkit.webhook_ingest import SANDBOX_KEY, SANDBOX_SECRET
from pinecall_webhook_ingest.app import create_app
from pinecall_webhook_ingest.settings import IngestSettings


@pytest.fixture
def ingest_settings(nats_url: str, nats_namespace: str) -> IngestSettings:
    return IngestSettings.from_env(
        {},
        nats_url=nats_url,
        nats_namespace=nats_namespace,
        log_format="text",
        livekit_keys=f"production={API_KEY}:{API_SECRET},sandbox={SANDBOX_KEY}:{SANDBOX_SECRET}",
    )


@pytest.fixture
async def ingest(ingest_settings: IngestSettings) -> AsyncIterator[Replica]:
    async with running(create_app(ingest_settings), "http://webhook-ingest.test") as client:
        yield client
