"""Issue 18, "Numbers" (acceptance 1 and 7): an org's phone number rings its agent through a trunk
and a dispatch rule the dispatcher keeps on the environment's LiveKit (the stand-in, through the
real livekit-api); a call to it is placed as every call; removing it removes them; bad input is
a problem detail and makes nothing, on LiveKit or in the table."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

import httpx
import pytest
import sqlalchemy as sa
from google.protobuf.message import Message
from granian.constants import Interfaces
from granian.server.embed import Server
from livekit import api
from livekit.protocol import sip

from pinecall_contracts.base import decode
from pinecall_contracts.dispatch import CallRing, JobOffer
from pinecall_dispatcher.store.tables import PHONE_NUMBERS
from pinecall_loadlab.livekit import StandIn
from pinecall_loadlab.livekit import events as ev
from pinecall_loadlab.livekit.callers import LAB_AGENT, LAB_ORG, Unrouted, dial
from pinecall_loadlab.livekit.testing import API_KEY, API_SECRET
from pinecall_loadlab.livekit.twirp import TwirpError
from pinecall_loadlab.scenarios.chain import Chain, ChainConfig, runtime_chain
from pinecall_servicekit.lifecycle import ExitCode
from pinecall_servicekit.platform import free_port
from pinecall_servicekit.testing.apps import Replica
from pinecall_testkit.call_log import Keys, bearer
from pinecall_testkit.roster import heartbeat

NUMBER = "+15550123"
PROBLEM = "application/problem+json"


@pytest.fixture
async def chain(
    standin: StandIn, chain_config: ChainConfig, call_log: Replica
) -> AsyncIterator[Chain]:
    async with runtime_chain(standin, chain_config, call_log=call_log) as c:
        yield c


async def heard(chain: Chain, keys: Keys) -> str:
    """A worker of ``pinecall`` heard (the fleets row of production names the stand-in)."""
    beat = heartbeat("worker-a")
    r = await chain.roster.post("/v1/fleet/heartbeat", json=beat, headers=bearer(keys.production))
    assert r.status_code == 200, r.text
    await chain.heard()
    return str(beat["worker"])


async def put(
    chain: Chain, key: str, number: str, body: Any, *, org: str | None = LAB_ORG, **params: str
) -> httpx.Response:
    query = ({"org": org} if org is not None else {}) | params
    return await chain.dispatchers[0].put(
        f"/v1/phone-numbers/{number}", json=body, params=query, headers=bearer(key)
    )


async def on_livekit(lk: StandIn) -> tuple[int, int]:
    """How many inbound trunks and dispatch rules the stand-in holds."""
    return len(lk.sip.store.inbound), len(lk.sip.store.rules)


async def rows(chain: Chain) -> int:
    async with chain.service.store.engine.connect() as conn:
        return int(
            (await conn.execute(sa.select(sa.func.count()).select_from(PHONE_NUMBERS))).scalar_one()
        )


async def test_a_number_rings_its_agent_and_removing_it_removes_its_trunk_and_rule(
    chain: Chain, keys: Keys
) -> None:
    worker = await heard(chain, keys)
    r = await put(chain, keys.app, NUMBER, {"agent": LAB_AGENT})
    assert r.status_code == 200, r.text
    made = r.json()
    assert (made["number"], made["org"], made["environment"], made["agent"], made["fleet"]) == (
        NUMBER, LAB_ORG, "production", LAB_AGENT, "pinecall",
    )  # fmt: skip
    # on LiveKit, as livekit-api lists them: the trunk holds the number, its rule rings the fleet
    trunks = await chain.livekit.sip.list_inbound_trunk(
        sip.ListSIPInboundTrunkRequest(numbers=[NUMBER])
    )
    assert [t.sip_trunk_id for t in trunks.items] == [made["trunk_id"]]
    [rule] = (await chain.livekit.sip.list_dispatch_rule(sip.ListSIPDispatchRuleRequest())).items
    assert (rule.sip_dispatch_rule_id, list(rule.trunk_ids)) == (
        made["rule_id"],
        [made["trunk_id"]],
    )
    [dispatch] = rule.room_config.agents
    assert dispatch.agent_name == "pinecall"
    assert decode(dispatch.metadata, CallRing) == CallRing(agent=LAB_AGENT, org=LAB_ORG)

    # a phone rings it: the rule's room, the SIP participant, and the dispatcher places the call
    caller = await dial(chain.lk.url, API_KEY, API_SECRET, phone="+15550100", to=NUMBER)
    assert caller.room.startswith("call_+15550100_")
    async with asyncio.timeout(30):
        [offered] = await chain.lk.events.wait_for(
            ev.DispatchCreated, lambda e: e.room == caller.room
        )
    assert offered.agent_name == worker
    offer = decode(offered.metadata, JobOffer)
    assert (offer.agent, offer.org, offer.caller) == (LAB_AGENT, LAB_ORG, "sip")
    p = await chain.livekit.room.get_participant(
        api.RoomParticipantIdentity(room=caller.room, identity="sip_+15550100")
    )
    assert p.kind == api.ParticipantInfo.Kind.SIP
    assert p.attributes["sip.trunkPhoneNumber"] == NUMBER
    assert p.attributes["sip.ruleID"] == made["rule_id"]
    await caller.leave()

    listed = await chain.dispatchers[0].get(
        "/v1/phone-numbers", params={"org": LAB_ORG}, headers=bearer(keys.app)
    )
    assert [n["number"] for n in listed.json()["numbers"]] == [NUMBER]
    gone = await chain.dispatchers[0].delete(
        f"/v1/phone-numbers/{NUMBER}", params={"org": LAB_ORG}, headers=bearer(keys.app)
    )
    assert gone.status_code == 200, gone.text
    assert await on_livekit(chain.lk) == (0, 0)
    assert await rows(chain) == 0
    with pytest.raises(Unrouted):
        await dial(chain.lk.url, API_KEY, API_SECRET, phone="+15550100", to=NUMBER)
    again = await chain.dispatchers[0].get(
        f"/v1/phone-numbers/{NUMBER}", params={"org": LAB_ORG}, headers=bearer(keys.app)
    )
    assert again.status_code == 404


@pytest.mark.parametrize(
    ("number", "body", "query", "status", "code"),
    [
        ("+0155501", {"agent": LAB_AGENT}, {}, 422, "invalid_number"),
        ("15550123", {"agent": LAB_AGENT}, {}, 422, "invalid_number"),
        ("+1555", {"agent": LAB_AGENT}, {}, 422, "invalid_number"),
        ("+1555012345678901", {"agent": LAB_AGENT}, {}, 422, "invalid_number"),
        (NUMBER, {"agent": "no-such-agent"}, {}, 422, "unknown_agent"),
        (NUMBER, {"agent": LAB_AGENT}, {"org": "org_other"}, 422, "unknown_agent"),
        (NUMBER, {"agent": LAB_AGENT}, {"org": None}, 422, "unprocessable"),
        (NUMBER, {"agent": 7}, {}, 400, "bad_request"),
        (NUMBER, {}, {}, 400, "bad_request"),
        (NUMBER, {"agent": LAB_AGENT}, {"environment": "sandbox"}, 403, "forbidden"),
    ],
)
async def test_a_bad_put_is_a_problem_and_makes_nothing(
    chain: Chain,
    keys: Keys,
    number: str,
    body: Any,
    query: dict[str, Any],
    status: int,
    code: str,
) -> None:
    await heard(chain, keys)
    org = query.pop("org", LAB_ORG)
    r = await put(chain, keys.app, number, body, org=org, **query)
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith(PROBLEM)
    assert r.json()["code"] == code
    assert await on_livekit(chain.lk) == (0, 0)
    assert await rows(chain) == 0


async def test_keys_scope_the_numbers(chain: Chain, keys: Keys) -> None:
    await heard(chain, keys)
    for key, status in [("pck_000000000000_nope-nope-nope-nope", 401), (keys.production, 403)]:
        r = await put(chain, key, NUMBER, {"agent": LAB_AGENT})
        assert r.status_code == status
    r = await put(chain, keys.operator, NUMBER, {"agent": LAB_AGENT})
    assert (r.status_code, r.json()["code"]) == (422, "unprocessable")  # names no environment
    r = await put(chain, keys.operator, NUMBER, {"agent": LAB_AGENT}, environment="production")
    assert r.status_code == 200, r.text
    assert await on_livekit(chain.lk) == (1, 1)
    for method, path, params, code in [
        ("GET", "/v1/phone-numbers/5550123", {"org": LAB_ORG}, "invalid_number"),
        ("DELETE", "/v1/phone-numbers/+1-555", {"org": LAB_ORG}, "invalid_number"),
        ("DELETE", f"/v1/phone-numbers/{NUMBER}", {}, "unprocessable"),  # names no org
        ("GET", "/v1/phone-numbers", {}, "unprocessable"),
    ]:
        r = await chain.dispatchers[0].request(
            method, path, params=params, headers=bearer(keys.app)
        )
        assert (r.status_code, r.json()["code"]) == (422, code), (method, path)
        assert r.headers["content-type"].startswith(PROBLEM)
    assert await on_livekit(chain.lk) == (1, 1)
    assert await rows(chain) == 1


async def test_a_number_taken_is_refused_and_another_orgs_number_is_unknown(
    chain: Chain, keys: Keys
) -> None:
    await heard(chain, keys)
    first = await put(chain, keys.app, NUMBER, {"agent": LAB_AGENT})
    assert first.status_code == 200, first.text
    same = await put(chain, keys.app, NUMBER, {"agent": LAB_AGENT})
    assert same.json() == first.json()  # the same put again: nothing made
    assert await on_livekit(chain.lk) == (1, 1)
    taken = [
        ({"agent": "support-bot"}, LAB_ORG, f"{NUMBER} already rings {LAB_AGENT}: remove it first"),
        ({"agent": LAB_AGENT}, "org_other", f"{NUMBER} is held by another org"),
    ]
    for body, org, said in taken:
        r = await put(chain, keys.app, NUMBER, body, org=org)
        assert (r.status_code, r.json()["code"]) == (409, "number_taken"), r.text
        if org != LAB_ORG:
            assert LAB_ORG not in r.text  # who holds it is not said to another org
        assert r.json()["detail"].startswith(said), r.text  # what to do, for the asker
    for method in ("GET", "DELETE"):
        r = await chain.dispatchers[0].request(
            method,
            f"/v1/phone-numbers/{NUMBER}",
            params={"org": "org_other"},
            headers=bearer(keys.app),
        )
        assert r.status_code == 404
        assert r.headers["content-type"].startswith(PROBLEM)
        assert LAB_ORG not in r.text  # another org's number: unknown, its holder not said
    assert await on_livekit(chain.lk) == (1, 1)
    assert await rows(chain) == 1

    # a number LiveKit already holds on a trunk the runtime did not make: 409, nothing kept
    await chain.livekit.sip.create_inbound_trunk(
        sip.CreateSIPInboundTrunkRequest(trunk=sip.SIPInboundTrunkInfo(numbers=["+15550177"]))
    )
    r = await put(chain, keys.app, "+15550177", {"agent": LAB_AGENT})
    assert (r.status_code, r.json()["code"]) == (409, "number_taken"), r.text
    assert await on_livekit(chain.lk) == (2, 1)
    assert await rows(chain) == 1


async def test_livekit_failing_midway_undoes_the_trunk_and_the_claim(
    chain: Chain, keys: Keys
) -> None:
    await heard(chain, keys)
    routes = chain.lk.twirp.routes
    key = ("livekit.SIP", "CreateSIPDispatchRule")
    request_type, handler = routes[key]

    async def unavailable(*_: Any) -> Message:
        raise TwirpError("unavailable", "the stand-in's SIP service is down (a test's fault)")

    routes[key] = (request_type, unavailable)
    r = await put(chain, keys.app, NUMBER, {"agent": LAB_AGENT})
    assert (r.status_code, r.json()["code"]) == (503, "livekit_unavailable"), r.text
    assert r.json()["retryable"] is True
    assert await on_livekit(chain.lk) == (0, 0)  # the trunk made first was deleted
    assert await rows(chain) == 0
    routes[key] = (request_type, handler)
    r = await put(chain, keys.app, NUMBER, {"agent": LAB_AGENT})
    assert r.status_code == 200, r.text
    assert await on_livekit(chain.lk) == (1, 1)


async def cli(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "pinecall_runtime", "numbers", "phone", *args,
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    async with asyncio.timeout(120):
        out, err = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_the_operator_puts_lists_shows_and_removes_a_number_with_the_cli(
    chain: Chain, keys: Keys, tmp_path: Path
) -> None:
    """``numbers phone`` against the chain's dispatcher, served on a port (Granian, this loop)."""
    await heard(chain, keys)
    port = free_port()
    app = chain.dispatchers[0].app
    server = Server(app, address="127.0.0.1", port=port, interface=Interfaces.ASGINL)
    serving = asyncio.create_task(server.serve())
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINECALL_")} | {
        "PINECALL_OPERATOR_KEY": keys.operator,
        "PINECALL_DISPATCHER_URL": f"http://127.0.0.1:{port}",
        "PINECALL_STATE_DIR": str(tmp_path / "no-up"),
    }
    org = ("--org", LAB_ORG)
    try:
        code, out, err = await cli(env, "put", NUMBER, "--agent", LAB_AGENT, *org)
        assert code == 0, err
        assert out.startswith(f"{NUMBER} ({LAB_ORG}, production): agent {LAB_AGENT}")
        code, out, _ = await cli(env, "list", *org, "--json")
        assert [n["number"] for n in json.loads(out)["numbers"]] == [NUMBER]
        code, out, err = await cli(env, "put", NUMBER, "--agent", "support-bot", *org)
        assert (code, err.strip().startswith("Error: [number_taken]")) == (1, True), err
        code, _, err = await cli(env, "put", "5550123", "--agent", LAB_AGENT, *org)
        assert code == 2  # a usage error: nothing asked
        code, out, err = await cli(env, "remove", NUMBER, *org)
        assert code == 0, err
        assert await on_livekit(chain.lk) == (0, 0)
        code, _, err = await cli(env, "show", NUMBER, *org)
        assert code == ExitCode.NOT_FOUND, err
    finally:
        cast(Any, server).stop()
        await serving
    env["PINECALL_DISPATCHER_URL"] = f"http://127.0.0.1:{free_port()}"  # nothing listens
    code, _, err = await cli(env, "list", *org)
    assert code == ExitCode.UNAVAILABLE, err


async def test_concurrent_puts_of_one_number_make_one_trunk_and_one_rule(
    chain: Chain, keys: Keys
) -> None:
    """Six identical puts at once (the probe's): each answers the same trunk and rule, and
    LiveKit holds one of each — a put that found the row of another still making them took it
    for a dead one's and made its own over it, leaving a rule of a deleted trunk."""
    await heard(chain, keys)
    answers = await asyncio.gather(
        *(put(chain, keys.app, NUMBER, {"agent": LAB_AGENT}) for _ in range(6))
    )
    assert [r.status_code for r in answers] == [200] * 6, [r.text for r in answers]
    assert len({(r.json()["trunk_id"], r.json()["rule_id"]) for r in answers}) == 1
    assert await on_livekit(chain.lk) == (1, 1)
    [rule] = chain.lk.sip.store.rules.values()
    assert list(rule.trunk_ids) == [answers[0].json()["trunk_id"]]
    assert await rows(chain) == 1
