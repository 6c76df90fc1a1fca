"""Outbound calls (issue 18, acceptance 2 and 7): ``POST /v1/calls/outbound`` in its chain, with
a real worker process running the real call on the vendor fakes and the stand-in's LiveKit SIP.

Answered, the agent's greeting is the first audio the callee hears, dialled only once the job
held the call; busy, unanswered or failed, the call ends ``not_reached`` with LiveKit SIP's
status on its log; the same request retried dials once; bad input is a problem detail and makes
nothing (no row, no room, no leg).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from livekit import api

from pinecall_clients.calllog import CallLogClient
from pinecall_contracts.agents import AgentDefinition
from pinecall_contracts.base import decode
from pinecall_contracts.dispatch import JobOffer
from pinecall_dispatcher.store.tables import OUTBOUND, ROOMS
from pinecall_loadlab.livekit import StandIn, StandInConfig
from pinecall_loadlab.livekit import events as ev
from pinecall_loadlab.scenarios.chain import Chain, ChainConfig, chain_call_log, runtime_chain
from pinecall_loadlab.scenarios.labworkers import ProcessWorker, start_process
from pinecall_loadlab.vendors import VendorFakes
from pinecall_loadlab.vendors.testing import *  # noqa: F403  (the vendor fakes)
from pinecall_servicekit import db
from pinecall_servicekit.testing.apps import Replica
from pinecall_testkit.call_log import Keys, bearer

ORG, AGENT, GREETING = "acme", "caller-bot", "Hello, this is Acme calling about your booking."
TRUNK = "pinecall-outbound"


@pytest.fixture
def chain_agents() -> list[tuple[str, str]]:
    """``caller-bot`` of acme (given a greeting by the tests that place a call), and
    ``sales-bot`` of another org only."""
    return [(ORG, AGENT), ("another", "sales-bot")]


@pytest.fixture
def standin_config(standin_config: StandInConfig) -> StandInConfig:
    return dataclasses.replace(standin_config, connection_timeout_s=1.0)


@pytest.fixture
def dispatcher_numbers() -> dict[str, Any]:
    return {"heard_s": 6.0, "reoffer_s": 12.0, "fleet_wait_s": 4.0, "sweep_s": 0.5}


@pytest.fixture
async def call_log(chain_config: ChainConfig) -> AsyncIterator[Replica]:
    async with chain_call_log(chain_config) as replica:
        yield replica


@pytest.fixture
async def chain(
    standin: StandIn, chain_config: ChainConfig, call_log: Replica
) -> AsyncIterator[Chain]:
    async with runtime_chain(standin, chain_config, call_log=call_log) as c:
        yield c


async def outbound(chain: Chain, key: str, **body: object) -> httpx.Response:
    return await chain.dispatchers[0].post(
        "/v1/calls/outbound",
        json={"agent": AGENT, "org": ORG, "to": "+14155550123"} | body,
        headers=bearer(key),
    )


async def made(chain: Chain) -> tuple[int, int, list[str]]:
    """What placing made: outbound rows, room rows, the stand-in's rooms."""
    engine = db.create_engine(chain.config.database_url)
    try:
        async with engine.connect() as conn:
            calls = (await conn.execute(sa.select(sa.func.count()).select_from(OUTBOUND))).scalar()
            rooms = (await conn.execute(sa.select(sa.func.count()).select_from(ROOMS))).scalar()
    finally:
        await engine.dispose()
    listed = await chain.livekit.room.list_rooms(api.ListRoomsRequest())
    return calls or 0, rooms or 0, [r.name for r in listed.rooms]


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"to": "4155550123"}, 400, None),  # no +
        ({"to": "+04155550123"}, 400, None),  # a country code starts 1 to 9
        ({"to": "+1415555012345678"}, 400, None),  # past E.164's 15 digits
        ({"to": "+1 415 555 0123"}, 400, None),
        ({"to": None}, 400, None),
        ({"agent": None}, 400, None),
        ({"id": "has a space"}, 400, None),
        ({"agent": "nobody-bot"}, 422, "unknown_agent"),
        ({"agent": "sales-bot"}, 422, "unknown_agent"),  # another org's agent
        ({"org": ""}, 422, "unknown_agent"),  # a request naming no org names no agent
    ],
)
async def test_bad_input_is_a_problem_and_makes_nothing(
    chain: Chain, keys: Keys, body: dict[str, Any], status: int, code: str | None
) -> None:
    sent = {k: v for k, v in body.items() if v is not None}
    if None in body.values():  # a field missing
        r = await chain.dispatchers[0].post(
            "/v1/calls/outbound",
            json={k: v for k, v in {"agent": AGENT, "org": ORG, "to": "+14155550123"}.items()
                  if k not in body} | sent,
            headers=bearer(keys.app),
        )  # fmt: skip
    else:
        r = await outbound(chain, keys.app, **sent)
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    if code is not None:
        assert r.json()["code"] == code
    assert await made(chain) == (0, 0, [])


async def test_the_app_key_is_needed(chain: Chain, keys: Keys) -> None:
    assert (await outbound(chain, "")).status_code == 401
    r = await outbound(chain, keys.production)  # a fleet key
    assert r.status_code == 403
    assert await made(chain) == (0, 0, [])
