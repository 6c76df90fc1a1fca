"""A written call's admission (issue 17, "The web chat": "admission included, the same quota and
one line as voice"): ``POST /v1/written-calls`` with the service key admits a chat or a WhatsApp
thread against its org's ``concurrent_calls`` (shared with voice), refuses an unknown agent 422
``unknown_agent`` and an org at its quota 429, counts each refusal as intake health, needs no
fleet heard and holds no seat; the call leaves the count when call-log says it ended."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from pinecall_loadlab.livekit import StandIn
from pinecall_loadlab.livekit.callers import LAB_AGENT, LAB_ORG
from pinecall_loadlab.scenarios.chain import Chain, ChainConfig, runtime_chain
from pinecall_servicekit.testing.apps import Replica
from pinecall_testkit.call_log import Keys, bearer
from pinecall_testkit.roster import heartbeat

from .conftest import SHORT

PROBLEM = "application/problem+json"


@pytest.fixture
def dispatcher_numbers() -> dict[str, Any]:
    return SHORT | {"agent_cache_s": 0.0}


@pytest.fixture
async def chain(
    standin: StandIn, chain_config: ChainConfig, call_log: Replica
) -> AsyncIterator[Chain]:
    async with runtime_chain(standin, chain_config, call_log=call_log) as c:
        yield c


async def admit(chain: Chain, key: str, call: str, **body: object) -> httpx.Response:
    wanted = {
        "call": call,
        "agent": LAB_AGENT,
        "org": LAB_ORG,
        "environment": "production",
        "channel": "chat",
    }
    return await chain.dispatchers[0].post(
        "/v1/written-calls", json=wanted | body, headers=bearer(key)
    )


async def refused(chain: Chain) -> dict[str, dict[str, int]]:
    return {f.fleet: f.refused for f in (await chain.service.offers()).fleets if f.refused}


async def written_rows(chain: Chain) -> int:
    import sqlalchemy as sa

    from pinecall_dispatcher.store.tables import WRITTEN

    async with chain.service.store.engine.connect() as conn:
        return int(await conn.scalar(sa.select(sa.func.count()).select_from(WRITTEN)) or 0)


async def test_a_written_call_needs_no_fleet_and_its_refusals_write_nothing(
    chain: Chain, keys: Keys
) -> None:
    # no worker was ever heard: a written call is admitted all the same (no fleet, no seat)
    r = await admit(chain, keys.service, "call_w1")
    assert r.status_code == 200, r.text
    assert (r.json()["call"], r.json()["environment"]) == ("call_w1", "production")
    # only the service key
    for key in (keys.app, keys.production, keys.operator):
        other = await admit(chain, key, "call_w2")
        assert (other.status_code, other.headers["content-type"]) == (403, PROBLEM)
    assert (await admit(chain, "", "call_w2")).status_code == 401
    # a bad body, an environment that is none
    for call, body in (
        ("call_w2", {"channel": "sms"}),
        ("call_w2", {"environment": "mars"}),
        ("bad call!", {}),
    ):
        bad = await admit(chain, keys.service, call, **body)
        assert bad.status_code in (400, 422), bad.text
        assert bad.headers["content-type"] == PROBLEM
    # an agent its org does not define there
    unknown = await admit(chain, keys.service, "call_w2", agent="nobody")
    assert (unknown.status_code, unknown.json()["code"]) == (422, "unknown_agent")
    assert unknown.json()["detail"].startswith(f"no agent nobody of org {LAB_ORG} in production")
    assert await written_rows(chain) == 1
    assert await refused(chain) == {"written/chat": {"unknown_agent": 1}}
    metrics = (await chain.dispatchers[0].get("/metrics")).text
    assert (
        'pinecall_admissions_total{answer="unknown_agent",environment="production",'
        'fleet="written/chat"} 1.0' in metrics
    )
    assert (
        'pinecall_admissions_total{answer="admitted",environment="production",'
        'fleet="written/chat"} 1.0' in metrics
    )


async def test_written_and_voice_calls_share_the_orgs_quota_until_the_call_ends(
    chain: Chain, keys: Keys, call_log: Replica
) -> None:
    ops = chain.dispatchers[0]
    r = await ops.post(
        "/v1/ops/quotas",
        json={"org": LAB_ORG, "environment": "production", "concurrent_calls": 2},
        headers=bearer(keys.operator),
    )
    assert r.status_code == 200, r.text
    assert (await admit(chain, keys.service, "call_w1")).status_code == 200
    # the same call asked again (a retry) is admitted once, and counted once
    assert (await admit(chain, keys.service, "call_w1")).status_code == 200
    beat = heartbeat("worker-a")
    r = await chain.roster.post("/v1/fleet/heartbeat", json=beat, headers=bearer(keys.production))
    assert r.status_code == 200, r.text
    await chain.heard()
    voice = await ops.post(
        "/v1/tokens", json={"agent": LAB_AGENT, "org": LAB_ORG}, headers=bearer(keys.app)
    )
    assert voice.status_code == 200, voice.text
    # two at once: a written call over the quota is 429, and so is a voice one
    over = await admit(chain, keys.service, "call_w2", channel="whatsapp")
    assert (over.status_code, over.json()["code"]) == (429, "too_many_requests")
    assert over.json()["detail"] == (
        f"{LAB_ORG} holds 2 calls in production, and its concurrent_calls quota there is 2"
    )
    again = await ops.post(
        "/v1/tokens", json={"agent": LAB_AGENT, "org": LAB_ORG}, headers=bearer(keys.app)
    )
    assert again.status_code == 429
    # the sandbox has its own count
    assert (await admit(chain, keys.service, "call_s1", environment="sandbox")).status_code == 200
    # the written call opens and ends on call-log: its place in the count is free again
    placing = chain.service.placing
    opened = await call_log.post(
        "/v1/calls",
        json={
            "call": "call_w1",
            "agent": LAB_AGENT,
            "org": LAB_ORG,
            "environment": "production",
            "room": "chat-call_w1",
            "worker": "chat/test",
            "channel": "chat",
        },
        headers=bearer(keys.production),
    )
    assert opened.status_code == 200, opened.text
    await placing.changes.wait_for(
        lambda: any(e.call == "call_w1" for e in placing.handled_calls), timeout=30
    )
    assert (await admit(chain, keys.service, "call_w2")).status_code == 429
    ended = await call_log.post(
        "/v1/calls/call_w1/end", json={"outcome": "timeout"}, headers=bearer(keys.production)
    )
    assert ended.status_code == 200, ended.text
    await placing.changes.wait_for(
        lambda: sum(e.call == "call_w1" for e in placing.handled_calls) == 2, timeout=30
    )
    assert (await admit(chain, keys.service, "call_w2")).status_code == 200
    assert await refused(chain) == {
        "pinecall": {"quota": 1},
        "written/chat": {"quota": 1},
        "written/whatsapp": {"quota": 1},
    }
    # a written call has no room: nothing of it is offered, and it holds no worker's seat
    for call in ("call_w1", "call_w2", "call_s1"):
        assert await chain.service.store.rooms.get(call) is None
