"""The simulated caller of ``POST /v1/evals/voice`` (issue 18, acceptance 5 and 7), end to end:
the chain (roster, webhook-ingest, the dispatcher, call-log) on the stand-in, a real worker
process running the real call on the vendor fakes, and the dispatcher's caller speaking with the
Cartesia fake and hearing with the Deepgram fake, as the worker does. Its room is made by its
token's ring and placed by the dispatcher like any call; the result is answered and on the
agent's log.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import httpx
import msgspec
import pytest
import sqlalchemy as sa
from livekit.agents import JobExecutorType
from livekit.protocol import models

from pinecall_clients.calllog import CallLogClient
from pinecall_contracts.agents import AgentDefinition
from pinecall_contracts.base import decode
from pinecall_contracts.dispatch import JobOffer
from pinecall_contracts.evals import EVAL_VOICE, VoiceEvalResult
from pinecall_dispatcher.store.tables import ROOMS
from pinecall_loadlab.livekit import StandIn, StandInConfig
from pinecall_loadlab.livekit import events as ev
from pinecall_loadlab.livekit.callers import LAB_AGENT, LAB_ORG
from pinecall_loadlab.scenarios.chain import Chain, ChainConfig, runtime_chain
from pinecall_loadlab.scenarios.labworkers import call_settings
from pinecall_loadlab.vendors import Reply, VendorFakes
from pinecall_loadlab.vendors.testing import vendor_fakes, vendors_config  # noqa: F401
from pinecall_servicekit.testing.apps import Replica
from pinecall_testkit.call_log import Keys, bearer
from pinecall_worker.call import entrypoint, prewarm
from pinecall_worker.server import Worker

from .conftest import SHORT

GREETER = "greeter"
GREETING = "Hello, you are through to the lab. How can I help?"
ANSWER = "Your order left the warehouse this morning."


@pytest.fixture
def standin_config(standin_config: StandInConfig) -> StandInConfig:
    """LiveKit's offer window as measured (10 s): a worker process's first job, its process
    warming, is not given up on."""
    return dataclasses.replace(standin_config, offer_deadline_s=10.0)


@pytest.fixture
def dispatcher_numbers(vendor_fakes: VendorFakes) -> dict[str, Any]:  # noqa: F811
    """The chain's dispatcher with the workers' voice and ears (the vendor fakes), re-offering
    at the seed's 12 s (after LiveKit's 10)."""
    return SHORT | {
        "reoffer_s": 12.0,
        "lab_rooms": True,
        "cartesia_url": vendor_fakes.cartesia_url,
        "cartesia_api_key": "lab",
        "deepgram_url": vendor_fakes.deepgram_url,
        "deepgram_api_key": "lab",
    }


@pytest.fixture
async def chain(
    standin: StandIn, chain_config: ChainConfig, call_log: Replica
) -> AsyncIterator[Chain]:
    async with runtime_chain(standin, chain_config, call_log=call_log) as c:
        yield c


@contextlib.asynccontextmanager
async def call_worker(chain: Chain, vendors: VendorFakes) -> AsyncIterator[Worker]:
    """A real worker of ``pinecall`` running the real call (``pinecall_worker.call``) on the
    vendor fakes, in lab rooms, writing to the chain's call-log; THREAD jobs (a process of its
    own warms its job processes for longer than LiveKit's offer on a loaded machine)."""
    settings = call_settings(chain, host="evals-a", seats=2, vendors=vendors, health_port=0)
    worker = Worker(
        settings,
        entrypoint,
        prewarm=prewarm,
        roster_transport=chain.roster.transport,
        executor=JobExecutorType.THREAD,
        num_idle_processes=1,
    )
    task = asyncio.create_task(worker.run())
    try:
        async with asyncio.timeout(60):
            await worker.registered.wait()
            await worker.heartbeat.beat()  # said registered now, not at its next beat
            await chain.heard()
        yield worker
    finally:
        await chain.hang_up()
        worker.stop()
        await task


async def _eval(chain: Chain, key: str, **body: Any) -> httpx.Response:
    dispatcher = chain.dispatchers[0]
    return await dispatcher.post(
        "/v1/evals/voice", json=body, headers=bearer(key), timeout=httpx.Timeout(300)
    )


async def test_a_script_is_said_to_the_agent_and_each_turns_first_audio_is_answered(
    chain: Chain,
    call_log: Replica,
    keys: Keys,
    vendor_fakes: VendorFakes,  # noqa: F811
) -> None:
    transport = httpx.ASGITransport(app=call_log.app)  # type: ignore[arg-type]
    async with CallLogClient("http://call-log.lab", keys.operator, transport=transport) as log:
        greeter = AgentDefinition(name=GREETER, prompt="Answer briefly.", greeting=GREETING)
        await log.put_agent(greeter, org=LAB_ORG, environment="production")
    vendor_fakes.anthropic.script(Reply(text=ANSWER), Reply(text=ANSWER))
    async with call_worker(chain, vendor_fakes) as worker:
        lines = ["Hello, I am calling about my order.", "When will it arrive?"]
        r = await _eval(chain, keys.app, agent=GREETER, org=LAB_ORG, script=lines)
    assert r.status_code == 200, r.text
    result = decode(r.content, VoiceEvalResult)
    assert (result.outcome, result.answered_by) == ("completed", worker.name)
    assert [t.said for t in result.turns] == ["", *lines]  # the greeting heard out first
    for turn in result.turns:
        assert turn.first_audio_ms is not None, turn
        assert turn.first_audio_ms > 0, turn
        assert turn.heard, turn  # the Deepgram fake's words for the agent's voice
    # the same offer path as any call: its ring said who rang, the dispatcher offered it
    [offered] = chain.lk.events.of(
        ev.DispatchCreated, lambda e: e.room == result.room and e.agent_name == worker.name
    )
    offer = decode(offered.metadata, JobOffer)
    assert (offer.call, offer.caller, offer.agent) == (result.call, "simulated", GREETER)
    journal = await chain.service.store.views.journal(result.call)
    assert any(f"offered to {worker.name}" in line.line for line in journal.lines)
    # the agent's side, on the call's log: two turns heard and answered, the caller hung up
    r = await call_log.get(f"/v1/calls/{result.call}/entries", headers=bearer(keys.operator))
    kinds = [e["kind"] for e in r.json()["entries"]]
    assert kinds.count("turn.user") == 2, kinds
    assert kinds.count("turn.agent") == 3, kinds  # the greeting and two answers
    # the result on the agent's log
    r = await call_log.get(
        f"/v1/agents/{GREETER}/log?environment=production", headers=bearer(keys.operator)
    )
    [entry] = [e for e in r.json()["entries"] if e["kind"] == EVAL_VOICE]
    assert msgspec.convert(entry["data"], VoiceEvalResult) == result


async def test_the_caller_hangs_up_on_call_ended(
    chain: Chain,
    call_log: Replica,
    keys: Keys,
    vendor_fakes: VendorFakes,  # noqa: F811
) -> None:
    """The call ended on call-log mid-script (an operator's end): the caller hears
    ``call.ended`` and leaves at once, saying no more lines (seed 000, "A worker that dies")."""
    vendor_fakes.anthropic.script(Reply(text=ANSWER), Reply(text=ANSWER), Reply(text=ANSWER))
    placing = chain.service.placing
    async with call_worker(chain, vendor_fakes):
        lines = ["Hello, I am calling about my order.", "When will it arrive?", "Thank you."]
        asked = asyncio.create_task(
            _eval(chain, keys.operator, agent=LAB_AGENT, org=LAB_ORG, script=lines,
                  environment="production")
        )  # fmt: skip
        await placing.changes.wait_for(
            lambda: any(
                e.what == "opened" and e.room.startswith("eval-") for e in placing.handled_calls
            ),
            timeout=120,
        )
        [opened] = [e for e in placing.handled_calls if e.what == "opened"]
        r = await call_log.post(
            f"/v1/calls/{opened.call}/end",
            json={"outcome": "completed", "reason": "the operator ended it"},
            headers=bearer(keys.operator),
        )
        assert r.status_code == 200, r.text
        r = await asked
    assert r.status_code == 200, r.text
    result = decode(r.content, VoiceEvalResult)
    assert (result.call, result.outcome, result.call_outcome) == (
        opened.call,
        "ended",
        "completed",
    )
    assert len([t for t in result.turns if t.said]) < len(lines)  # it stopped mid-script
    [left] = chain.lk.events.of(
        ev.ParticipantLeft, lambda e: e.room == result.room and e.identity.startswith("eval-")
    )
    assert left.reason == models.DisconnectReason.CLIENT_INITIATED  # a goodbye, not a loss


async def test_bad_input_is_a_problem_and_makes_nothing(chain: Chain, keys: Keys) -> None:
    """A script with no lines, an unknown agent, another org's agent, an operator naming no
    environment, an app key naming another, a NUL in a line: a problem detail each, and no
    room, no call."""
    cases = [
        (keys.app, {"agent": LAB_AGENT, "org": LAB_ORG, "script": []}, 400, "bad_request"),
        (keys.app, {"agent": "nobody", "org": LAB_ORG, "script": ["Hi."]}, 422, "unknown_agent"),
        (keys.app, {"agent": LAB_AGENT, "org": "org_other", "script": ["Hi."]}, 422,
         "unknown_agent"),
        (keys.operator, {"agent": LAB_AGENT, "org": LAB_ORG, "script": ["Hi."]}, 422,
         "unprocessable"),
        (keys.app, {"agent": LAB_AGENT, "org": LAB_ORG, "script": ["Hi."],
                    "environment": "sandbox"}, 403, "forbidden"),
        (keys.app, {"agent": LAB_AGENT, "org": LAB_ORG, "script": [""]}, 400, "bad_request"),
        # a NUL cannot be on the log: refused before the call (a probe's eval ran, answered
        # 200, and its result never reached the agent's log)
        (keys.app, {"agent": LAB_AGENT, "org": LAB_ORG, "script": ["hi\u0000there"]}, 422,
         "unprocessable"),
        (keys.production, {"agent": LAB_AGENT, "org": LAB_ORG, "script": ["Hi."]}, 403,
         "forbidden"),
    ]  # fmt: skip
    for key, body, status, code in cases:
        r = await _eval(chain, key, **body)
        assert (r.status_code, r.json()["code"]) == (status, code), (body, r.text)
        assert r.headers["content-type"].startswith("application/problem+json")
    assert not chain.lk.rooms.rooms  # no room made
    async with chain.service.store.engine.connect() as conn:  # no call admitted
        assert (await conn.execute(sa.select(sa.func.count()).select_from(ROOMS))).scalar() == 0
