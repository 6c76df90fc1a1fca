"""A call-log replica served on a real port, with the booking agent defined: what the SDK's apps
dial (the test kit's replica, as call-log's own tests start it)."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from pinecall_testkit import appsocket
from pinecall_testkit.appsocket import Serve, define
from pinecall_testkit.call_log import Keys, Listening, make_keys

APPS = Path(__file__).parent / "apps"
"""The apps ``pinecall start`` runs in the tests, and the agent they hold (``booking.yaml``)."""


@pytest.fixture
def booking() -> dict[str, Any]:
    """The booking agent's definition (``apps/booking.yaml``)."""
    loaded: dict[str, Any] = yaml.safe_load((APPS / "booking.yaml").read_text())
    return loaded


@pytest.fixture
def prompt_hash(booking: dict[str, Any]) -> str:
    """What a call of the booking agent opens with (``call.started``'s prompt hash)."""
    return hashlib.sha256(booking["prompt"].encode()).hexdigest()


@pytest.fixture
def serve(database_url: str, nats_url: str, nats_namespace: str) -> Serve:
    return appsocket.serving(appsocket.call_log_settings(database_url, nats_url, nats_namespace))


@pytest.fixture
async def keys(database_url: str) -> Keys:
    return await make_keys(database_url)


@pytest.fixture
async def replica(serve: Serve, keys: Keys, booking: dict[str, Any]) -> AsyncIterator[Listening]:
    async with serve() as one:
        await define(one, keys, body=booking)
        yield one
