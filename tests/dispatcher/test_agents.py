"""A ring for an agent that does not exist in its environment is refused at admission with a named
reason (issue 16, "Agents, as data"): the token endpoint answers 422 ``unknown_agent``; a phone
ring is offered to nobody and its room taken down; both are counted; call-log silent fails open.
The agents are call-log's (a replica in the test's loop); the chain defines the lab's."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from pinecall_contracts.base import encode
from pinecall_contracts.dispatch import CallRing
from pinecall_labroom import LabRoom
from pinecall_loadlab.livekit import StandIn
from pinecall_loadlab.livekit import events as ev
from pinecall_loadlab.livekit.callers import LAB_AGENT, LAB_ORG, sip_call
from pinecall_loadlab.livekit.testing import API_KEY, API_SECRET
from pinecall_loadlab.scenarios.chain import Chain, ChainConfig, lab_definition, runtime_chain
from pinecall_servicekit.testing.apps import Replica
from pinecall_testkit.call_log import Keys, bearer
from pinecall_testkit.roster import heartbeat

from .conftest import SHORT

PROBLEM = "application/problem+json"


@pytest.fixture
def dispatcher_numbers() -> dict[str, Any]:
    """Nothing remembered: a definition put is seen by the next lookup (5 s in production)."""
    return SHORT | {"agent_cache_s": 0.0}


@pytest.fixture
async def chain(
    standin: StandIn, chain_config: ChainConfig, call_log: Replica
) -> AsyncIterator[Chain]:
    async with runtime_chain(standin, chain_config, call_log=call_log) as c:
        yield c


async def token(chain: Chain, key: str, agent: str, org: str | None = LAB_ORG) -> httpx.Response:
    body = {"agent": agent} | ({"org": org} if org is not None else {})
    return await chain.dispatchers[0].post("/v1/tokens", json=body, headers=bearer(key))


async def define(call_log: Replica, keys: Keys, agent: str) -> None:
    """``agent`` of the lab's org, in production only (the app key's environment)."""
    put = await call_log.put(
        f"/v1/agents/{agent}", content=encode(lab_definition(agent)), params={"org": LAB_ORG},
        headers=bearer(keys.app) | {"content-type": "application/json"},
    )  # fmt: skip
    assert put.status_code == 200, put.text


async def heard(chain: Chain, keys: Keys) -> str:
    """A worker of ``pinecall`` with seats free, heard by the roster and the dispatcher now (a
    heartbeat, as a worker posts it); its name."""
    beat = heartbeat("worker-a")
    r = await chain.roster.post("/v1/fleet/heartbeat", json=beat, headers=bearer(keys.production))
    assert r.status_code == 200, r.text
    await chain.heard()
    return str(beat["worker"])


async def refused(chain: Chain) -> dict[str, dict[str, int]]:
    return {f.fleet: f.refused for f in (await chain.service.offers()).fleets if f.refused}


async def ring(chain: Chain, room: str, agent: str | None, org: str = LAB_ORG) -> LabRoom:
    """A phone caller in ``room``, its ring for ``org``'s ``agent`` (None: no CallRing)."""
    metadata = "" if agent is None else encode(CallRing(agent=agent, org=org)).decode()
    return await sip_call(
        chain.livekit, chain.lk.url, API_KEY, API_SECRET, room=room, fleet="pinecall",
        metadata=metadata,
    )  # fmt: skip


async def test_a_token_for_an_agent_not_defined_there_is_422_unknown_agent_and_counted(
    chain: Chain, keys: Keys, call_log: Replica
) -> None:
    # no worker heard: an unknown agent is said before the fleet's health
    first = await token(chain, keys.app, "nobody")
    assert (first.status_code, first.headers["content-type"]) == (422, PROBLEM)
    problem = first.json()
    assert (problem["code"], problem.get("retryable", False)) == ("unknown_agent", False)
    assert problem["detail"].startswith("no agent nobody of org lab in production: define it")
    await heard(chain, keys)
    no_org = await token(chain, keys.app, LAB_AGENT, org=None)
    assert (no_org.status_code, no_org.json()["code"]) == (422, "unknown_agent")
    assert "of no org (name the agent's org)" in no_org.json()["detail"]
    # an agent is its org's in one environment
    await define(call_log, keys, "prod-only")
    assert (await token(chain, keys.app, "prod-only")).status_code == 200
    assert (await token(chain, keys.app, "prod-only", org="another")).status_code == 422
    in_sandbox = await token(chain, keys.app_sandbox, "prod-only")
    assert (in_sandbox.status_code, in_sandbox.json()["code"]) == (422, "unknown_agent")
    # the lab's agent is defined in the sandbox: past it, to line health (no worker heard there)
    passed = await token(chain, keys.app_sandbox, LAB_AGENT)
    assert (passed.status_code, passed.json()["code"]) == (503, "not_ready")
    # counted as a refusal at admission (no call record is left), and nothing on any agent's log
    assert await refused(chain) == {
        "pinecall": {"unknown_agent": 3},
        "pinecall-sandbox": {"unknown_agent": 1, "not_ready": 1},
    }
    metrics = (await chain.dispatchers[0].get("/metrics")).text
    assert (
        'pinecall_admissions_total{answer="unknown_agent",environment="production",'
        'fleet="pinecall"} 3.0' in metrics
    )
    for agent in ("nobody", "prod-only", LAB_AGENT):
        log = await call_log.get(
            f"/v1/agents/{agent}/log", params={"environment": "production"},
            headers=bearer(keys.operator),
        )  # fmt: skip
        assert log.json()["entries"] == []


async def test_a_definition_put_is_admitted_by_the_next_token(
    chain: Chain, keys: Keys, call_log: Replica
) -> None:
    await heard(chain, keys)
    assert (await token(chain, keys.app, "late-bot")).status_code == 422
    await define(call_log, keys, "late-bot")
    assert (await token(chain, keys.app, "late-bot")).status_code == 200


@pytest.mark.parametrize(
    ("agent", "whose"),
    [("nobody", "of org lab"), (None, "of no org")],
    ids=["an agent its org does not define", "a ring with no CallRing"],
)
async def test_a_phone_ring_for_no_agent_is_offered_to_nobody_and_hung_up(
    chain: Chain, keys: Keys, agent: str | None, whose: str
) -> None:
    """Refused as it arrives: no worker nor the overflow is offered it (no sentence promising a
    call back nobody could make), the room is taken down at once (LiveKit SIP hangs up), and the
    call is kept ended, journaled and counted."""
    await heard(chain, keys)
    await chain.overflow()
    async with asyncio.timeout(60):
        caller = await ring(chain, "nobody-1", agent)
        await caller.closed.wait()
    assert caller.removed_reason == "ROOM_DELETED"
    assert chain.lk.events.of(ev.DispatchCreated, lambda e: e.room == "nobody-1") == []
    [row] = await chain.service.store.rooms.of_room("production", "nobody-1")
    assert (row.state, row.outcome, row.caller) == ("ended", "unknown_agent", "sip")
    journal = await chain.service.store.views.journal(row.call)
    assert [line.line for line in journal.lines] == [
        f"room {row.call}: refused (unknown_agent): no agent {row.agent} {whose}"
        " in production; offered to nobody, the room taken down"
    ]
    assert await refused(chain) == {"pinecall": {"unknown_agent": 1}}
    # the lab's agent, rung the same way, is offered
    async with asyncio.timeout(60):
        await ring(chain, "lab-1", LAB_AGENT)
        await chain.lk.events.wait_for(ev.DispatchCreated, lambda e: e.room == "lab-1")


async def test_call_log_silent_fails_open_and_the_ring_is_offered(
    standin: StandIn, chain_config: ChainConfig, keys: Keys
) -> None:
    """A chain with no call-log: nothing answers the dispatcher's lookup, so no answer says
    the agent is unknown, and the caller is offered as before (never refused for a lookup)."""
    async with runtime_chain(standin, chain_config) as chain, asyncio.timeout(60):
        name = await heard(chain, keys)
        await ring(chain, "open-1", "nobody")
        [created] = await chain.lk.events.wait_for(ev.DispatchCreated, lambda e: e.room == "open-1")
    assert created.agent_name == name
