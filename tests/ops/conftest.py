"""The platform an operator looks at, in the test's loop: the LiveKit stand-in, the roster,
webhook-ingest and a dispatcher (the runtime choosing's chain) and a call-log replica, on the
test's own database and NATS namespace; no worker runs (heartbeats are posted as a worker's)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from pinecall_call_log.app import create_app as call_log_app
from pinecall_call_log.settings import CallLogSettings
from pinecall_loadlab.livekit import StandIn
from pinecall_loadlab.livekit.testing import *  # noqa: F403  (the stand-in's fixtures)
from pinecall_loadlab.scenarios.chain import Chain, ChainConfig, runtime_chain
from pinecall_loadlab.scenarios.testing import *  # noqa: F403  (keys, chain_config)
from pinecall_reaper.app import create_app as reaper_app
from pinecall_reaper.settings import ReaperSettings
from pinecall_servicekit.operator import OperatorSettings
from pinecall_servicekit.testing.apps import Replica, running
from pinecall_testkit.call_log import Keys


@pytest.fixture
def dispatcher_numbers() -> dict[str, Any]:
    """A room in offers is kept at once (the seed's minute shortened to nothing): doctor names
    it without a test waiting a minute; the rule is the same."""
    return {"kept_s": 0.0}


@pytest.fixture
async def call_log(database_url: str, nats_url: str, nats_namespace: str) -> AsyncIterator[Replica]:
    settings = CallLogSettings.from_env(
        {}, database_url=database_url, nats_url=nats_url, nats_namespace=nats_namespace
    )
    async with running(call_log_app(settings), "http://call-log.lab") as client:
        yield client


@pytest.fixture
async def platform(
    standin: StandIn, chain_config: ChainConfig, call_log: Replica, keys: Keys
) -> AsyncIterator[Chain]:
    """The chain, and a reaper beside it (it reaps once, on the chain's stand-in and
    call-log; doctor finds it by its ``$SRV.PING``)."""
    async with runtime_chain(standin, chain_config, call_log=call_log) as chain:
        reaper = ReaperSettings.from_env(
            {},
            database_url=chain_config.database_url,
            nats_url=chain_config.nats_url,
            nats_namespace=chain_config.namespace,
            call_log_url=chain.urls["call-log"],
            service_key=keys.service,
            livekit_url=standin.url,
            livekit_api_key=chain_config.api_key,
            livekit_api_secret=chain_config.api_secret,
            reap_every_s=3600,
            log_format="text",
        )
        async with running(reaper_app(reaper), "http://reaper.lab"):
            yield chain


@pytest.fixture
def operator(database_url: str, nats_url: str, nats_namespace: str, keys: Keys) -> OperatorSettings:
    """What the CLI reads, pointed at the test's platform."""
    return OperatorSettings.from_env(
        {},
        database_url=database_url,
        nats_url=nats_url,
        nats_namespace=nats_namespace,
        operator_key=keys.operator,
        state_dir="/nonexistent",
    )


def cli_env(settings: OperatorSettings) -> dict[str, str]:
    """The environment of a ``pinecall-runtime`` process reading ``settings``."""
    import os

    base = {k: v for k, v in os.environ.items() if not k.startswith("PINECALL_")}
    return base | {k: v for k, v in settings.to_env().items() if k.startswith("PINECALL_") and v}
