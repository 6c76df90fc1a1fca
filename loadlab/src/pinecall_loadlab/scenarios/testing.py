"""pytest fixtures of the runtime choosing's chain; import them into a conftest.py.

    from pinecall_loadlab.livekit.testing import *  # noqa: F403  (the stand-in's)
    from pinecall_loadlab.scenarios.testing import *  # noqa: F403

- `keys` → one key of each kind in the test's database (`pinecall_testkit.call_log.Keys`);
- `dispatcher_numbers` → the dispatcher's settings to change (none; override it to shorten them);
- `chain_agents` → the `(org, agent)`s a chain with call-log defines (the lab's agent; override
  it to ring others);
- `chain_config` → the chain's `ChainConfig` on the test's database, namespace and stand-in keys;
- `chain` → the chain (roster, webhook-ingest, one dispatcher) on `standin`, closed after.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from pinecall_loadlab.livekit import StandIn
from pinecall_loadlab.livekit.callers import LAB_AGENT, LAB_ORG
from pinecall_loadlab.livekit.testing import API_KEY, API_SECRET
from pinecall_loadlab.scenarios.chain import Chain, ChainConfig, runtime_chain
from pinecall_testkit.call_log import Keys, make_keys

__all__ = ["chain", "chain_agents", "chain_config", "dispatcher_numbers", "keys"]


@pytest.fixture
async def keys(database_url: str) -> Keys:
    return await make_keys(database_url)


@pytest.fixture
def dispatcher_numbers() -> dict[str, Any]:
    """The dispatcher's settings of a test: the seed's (override in a conftest or module)."""
    return {}


@pytest.fixture
def chain_agents() -> list[tuple[str, str]]:
    """The ``(org, agent)``s a chain with call-log defines in every environment."""
    return [(LAB_ORG, LAB_AGENT)]


@pytest.fixture
def chain_config(
    database_url: str,
    nats_url: str,
    nats_namespace: str,
    keys: Keys,
    dispatcher_numbers: dict[str, Any],
    chain_agents: list[tuple[str, str]],
) -> ChainConfig:
    return ChainConfig(
        database_url=database_url,
        nats_url=nats_url,
        namespace=nats_namespace,
        operator_key=keys.operator,
        service_key=keys.service,
        fleet_keys={"production": keys.production, "sandbox": keys.sandbox},
        api_key=API_KEY,
        api_secret=API_SECRET,
        dispatcher=dispatcher_numbers,
        agents=chain_agents,
    )


@pytest.fixture
async def chain(standin: StandIn, chain_config: ChainConfig) -> AsyncIterator[Chain]:
    async with runtime_chain(standin, chain_config) as c:
        yield c
