"""Admission at the token endpoint (issue 7, acceptance 7; seed 000 "Full, at the endpoint";
seed 003): a visitor's token, 503 ``fleet_full`` with ``fleet.full`` on the agent's log, 503
``not_ready`` with no worker heard for 90 s, and an org's quota per environment."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import psycopg
import pytest
from livekit import api

from pinecall_contracts.base import decode
from pinecall_contracts.dispatch import JobOffer
from pinecall_labroom import LabRoom
from pinecall_loadlab.livekit import StandIn
from pinecall_loadlab.livekit import events as ev
from pinecall_loadlab.livekit.callers import LAB_AGENT, LAB_ORG
from pinecall_loadlab.scenarios.chain import Chain, ChainConfig, runtime_chain
from pinecall_loadlab.scenarios.runtime_choosing import place_calls
from pinecall_servicekit.testing.apps import Replica
from pinecall_testkit.call_log import Keys, bearer


@pytest.fixture
def chain_agents() -> list[tuple[str, str]]:
    """The lab's agent (its phone callers), and support-bot of the orgs whose visitors this
    module admits."""
    return [(LAB_ORG, LAB_AGENT), ("acme", "support-bot"), ("another", "support-bot")]


@pytest.fixture
async def chain(
    standin: StandIn, chain_config: ChainConfig, call_log: Replica
) -> AsyncIterator[Chain]:
    async with runtime_chain(standin, chain_config, call_log=call_log) as c:
        yield c


async def token(chain: Chain, key: str, **body: object) -> httpx.Response:
    return await chain.dispatchers[0].post(
        "/v1/tokens", json={"agent": "support-bot", "org": "acme"} | body, headers=bearer(key)
    )


async def test_not_ready_before_any_worker_is_heard_and_nothing_is_written(
    chain: Chain, keys: Keys
) -> None:
    r = await token(chain, keys.app)
    assert r.status_code == 503
    assert r.headers["content-type"].startswith("application/problem+json")
    assert r.json()["code"] == "not_ready"
    snapshot = await chain.service.offers("pinecall")
    assert [(f.fleet, f.refused, f.in_offers) for f in snapshot.fleets] == [
        ("pinecall", {"not_ready": 1}, 0)
    ]
    metrics = (await chain.dispatchers[0].get("/metrics")).text
    assert (
        'pinecall_admissions_total{answer="not_ready",environment="production",fleet="pinecall"} 1.0'
        in metrics
    )


async def test_a_full_fleet_answers_503_and_writes_fleet_full_on_the_agents_log(
    chain: Chain, keys: Keys, call_log: Replica
) -> None:
    await chain.worker("one-seat", seats=1)
    async with asyncio.timeout(60):
        [call], _ = await place_calls(chain, prefix="full", calls=1, settle_each=True)
        await chain.handled(call.room, "participant_joined", "AGENT")
    r = await token(chain, keys.app, org="acme")
    assert r.status_code == 503
    problem = r.json()
    assert problem["code"] == "fleet_full"
    assert "POST /v1/callbacks" in problem["detail"]
    log = await call_log.get(
        "/v1/agents/support-bot/log",
        params={"environment": "production"},
        headers=bearer(keys.operator),
    )
    [entry] = log.json()["entries"]
    assert (entry["kind"], entry["data"]["fleet"], entry["data"]["org"]) == (
        "fleet.full",
        "pinecall",
        "acme",
    )


async def test_a_visitors_token_makes_the_room_the_dispatcher_places(
    chain: Chain, keys: Keys
) -> None:
    a = await chain.worker("worker-a", seats=2)
    r = await token(chain, keys.app, org="acme", context={"page": "/pricing"})
    assert r.status_code == 200, r.text
    visitor = r.json()
    assert (visitor["fleet"], visitor["environment"], visitor["url"]) == (
        "pinecall",
        "production",
        chain.lk.url,
    )
    async with asyncio.timeout(60):
        room = await LabRoom.connect(visitor["url"], visitor["token"])
        await chain.handled(visitor["room"], "participant_joined", "AGENT")
    assert await chain.answered_by(visitor["room"]) == a.name
    [created] = chain.lk.events.of(ev.DispatchCreated, lambda e: e.room == visitor["room"])
    offer = decode(created.metadata, JobOffer)
    assert (offer.call, offer.caller, offer.agent, offer.org, offer.context) == (
        visitor["call"],
        "web",
        "support-bot",
        "acme",
        {"page": "/pricing"},
    )
    await room.leave()


async def test_a_visitor_whose_room_was_made_before_its_join_is_answered(
    chain: Chain, keys: Keys, livekit_api: api.LiveKitAPI
) -> None:
    """LiveKit applies a token's room configuration (its ring) only when the join makes the
    room (``shared/reference/livekit-protocol.md`` §2.2): a room a page's server made first has
    no ring, and the dispatcher places the visitor from its admission instead."""
    a = await chain.worker("worker-a", seats=2)
    r = await token(chain, keys.app, org="acme")
    assert r.status_code == 200, r.text
    visitor = r.json()
    await livekit_api.room.create_room(api.CreateRoomRequest(name=visitor["room"]))
    async with asyncio.timeout(60):
        room = await LabRoom.connect(visitor["url"], visitor["token"])
        await chain.handled(visitor["room"], "participant_joined", "AGENT")
    assert await chain.answered_by(visitor["room"]) == a.name
    [created] = chain.lk.events.of(ev.DispatchCreated, lambda e: e.room == visitor["room"])
    offer = decode(created.metadata, JobOffer)
    assert (offer.call, offer.caller, offer.org) == (visitor["call"], "web", "acme")
    await room.leave()


async def test_an_orgs_quota_is_per_environment(chain: Chain, keys: Keys) -> None:
    await chain.worker("worker-p", seats=8)
    await chain.worker("worker-s", seats=8, fleet="pinecall-sandbox", environment="sandbox")
    ops = chain.dispatchers[0]
    r = await ops.post(
        "/v1/ops/quotas",
        json={"org": "acme", "environment": "production", "concurrent_calls": 1},
        headers=bearer(keys.operator),
    )
    assert r.status_code == 200, r.text
    assert (await token(chain, keys.app, org="acme")).status_code == 200
    over = await token(chain, keys.app, org="acme")
    assert (over.status_code, over.json()["code"]) == (429, "too_many_requests")
    assert over.json()["detail"] == (
        "acme holds 1 call in production, and its concurrent_calls quota there is 1"
    )
    # the sandbox has its own count: its calls never use production's
    for _ in range(2):
        r = await token(chain, keys.app_sandbox, org="acme")
        assert (r.status_code, r.json()["fleet"]) == (200, "pinecall-sandbox")
    assert (await token(chain, keys.app, org="acme")).status_code == 429
    assert (await token(chain, keys.app, org="another")).status_code == 200
    snapshot = await chain.service.offers("pinecall")
    assert snapshot.fleets[0].refused == {"quota": 2}


async def test_an_orgs_own_quota_holds_where_the_dispatcher_has_none(
    chain: Chain, keys: Keys, database_url: str
) -> None:
    """``orgs create --quota concurrent_calls=1`` (``roster.orgs``) holds in each environment;
    the dispatcher's own row for the org in one environment overrides it there."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO roster.orgs (name, environments, quotas, created_at)"
            " VALUES ('another', '{production,sandbox}', '{\"concurrent_calls\": 1}', now())"
        )
    await chain.worker("worker-p", seats=8)
    await chain.worker("worker-s", seats=8, fleet="pinecall-sandbox", environment="sandbox")
    assert (await token(chain, keys.app, org="another")).status_code == 200
    over = await token(chain, keys.app, org="another")
    assert over.json()["detail"] == (
        "another holds 1 call in production, and its concurrent_calls quota there is 1"
    )
    assert (await token(chain, keys.app_sandbox, org="another")).status_code == 200
    assert (await token(chain, keys.app_sandbox, org="another")).status_code == 429
    r = await chain.dispatchers[0].post(
        "/v1/ops/quotas",
        json={"org": "another", "environment": "production", "concurrent_calls": 2},
        headers=bearer(keys.operator),
    )
    assert r.status_code == 200, r.text
    assert (await token(chain, keys.app, org="another")).status_code == 200
    assert (await token(chain, keys.app, org="acme")).status_code == 200  # no quota: no limit


async def test_a_fleet_all_cordoned_is_refused_as_cordoned_not_as_full(
    chain: Chain, keys: Keys, call_log: Replica
) -> None:
    """Seen: ``fleet.full`` on the tenant's log for a fleet whose one worker an operator had
    cordoned, with every seat free (issue 14, item 11)."""
    await chain.pretend("cordoned", seats=4, load=lambda _server: 0.0)
    r = await chain.roster.post(
        "/v1/ops/fleet/pinecall/cordoned/cordon", headers=bearer(keys.operator)
    )
    assert r.status_code == 200, r.text
    await chain.heard()
    r = await token(chain, keys.app, org="acme")
    assert r.status_code == 503
    problem = r.json()
    assert problem["code"] == "fleet_full"  # the page offers a call back, as for a full fleet
    assert problem["detail"].startswith("every worker of pinecall heard lately is cordoned")
    log = await call_log.get(
        "/v1/agents/support-bot/log",
        params={"environment": "production"},
        headers=bearer(keys.operator),
    )
    [entry] = log.json()["entries"]
    assert (entry["kind"], entry["data"]["reason"], entry["data"]["org"]) == (
        "fleet.refused",
        "cordoned",
        "acme",
    )
    snapshot = await chain.service.offers("pinecall")
    assert [f.refused for f in snapshot.fleets if f.fleet == "pinecall"] == [{"cordoned": 1}]
