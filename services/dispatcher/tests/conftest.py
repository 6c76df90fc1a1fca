"""The dispatcher in its chain, on real Postgres and NATS, the LiveKit stand-in and real workers.

``chain`` runs the roster, webhook-ingest and the dispatcher in the test's loop
(``pinecall_loadlab.scenarios.chain``); the stand-in's webhooks reach webhook-ingest, and workers
are unmodified ``Worker``s on the THREAD executor. The dispatcher's numbers are shortened
(``SHORT``): the same rules, in seconds a test can wait.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from pinecall_call_log.testing import Keys, make_keys
from pinecall_loadlab.livekit import StandIn
from pinecall_loadlab.livekit.testing import *  # noqa: F403  (the stand-in's fixtures)
from pinecall_loadlab.livekit.testing import API_KEY, API_SECRET
from pinecall_loadlab.scenarios.chain import Chain, ChainConfig, runtime_chain

SHORT: dict[str, Any] = {"reoffer_s": 4.0, "fleet_wait_s": 4.0, "sweep_s": 0.5}
"""The stand-in's offer deadline is 3 s in tests: a re-offer after 4 s comes after LiveKit gave up
on the first offer, as 12 s comes after its 10 s."""


@pytest.fixture
async def keys(database_url: str) -> Keys:
    return await make_keys(database_url)


@pytest.fixture
def dispatcher_numbers() -> dict[str, Any]:
    """The dispatcher's settings of a test (override in a module)."""
    return SHORT


@pytest.fixture
def chain_config(
    database_url: str,
    nats_url: str,
    nats_namespace: str,
    keys: Keys,
    dispatcher_numbers: dict[str, Any],
) -> ChainConfig:
    return ChainConfig(
        database_url=database_url,
        nats_url=nats_url,
        namespace=nats_namespace,
        operator_key=keys.operator,
        fleet_keys={"production": keys.production, "sandbox": keys.sandbox},
        api_key=API_KEY,
        api_secret=API_SECRET,
        dispatcher=dispatcher_numbers,
    )


@pytest.fixture
async def chain(standin: StandIn, chain_config: ChainConfig) -> AsyncIterator[Chain]:
    async with runtime_chain(standin, chain_config) as c:
        yield c
