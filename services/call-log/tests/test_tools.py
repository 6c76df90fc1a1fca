"""Tool calls once per id across replicas (issue 5, acceptance 3; seed 002, "The gateway restarts").

The app here is a NATS subscriber of the agent's tool calls that answers through the service's
endpoint with its app key, as an app's socket would.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

from pinecall_call_log.service import CallLogService
from pinecall_contracts.calls import ToolAsked
from pinecall_servicekit.testing.metrics import unregistered
from pinecall_testkit.call_log import Keys, Replica, batch, bearer, opening

Start = Callable[[], AbstractAsyncContextManager[Replica]]
TOOL = {"id": "tc_1", "name": "book_slot", "arguments": {"day": "2026-12-02"}, "timeout_s": 30}


def service(replica: Replica) -> CallLogService:
    found: CallLogService = replica.app.state.call_log
    return found


async def app_listening(replica: Replica) -> asyncio.Queue[ToolAsked]:
    bus = service(replica).bus
    heard: asyncio.Queue[ToolAsked] = asyncio.Queue()
    await bus.subscribe(bus.subjects.tool_asked("production", "support-bot"), ToolAsked, heard.put)
    await bus.client.flush()
    return heard


async def kinds(replica: Replica, keys: Keys) -> list[str]:
    log = (await replica.get("/v1/calls/call_1/entries", headers=bearer(keys.operator))).json()
    return [e["kind"] for e in log["entries"]]


async def test_a_retry_on_the_other_replica_joins_the_round_trip_and_the_app_sees_it_once(
    replica: Start, keys: Keys
) -> None:
    auth = bearer(keys.production)
    async with replica() as a, replica() as b:
        await a.post("/v1/calls", json=opening(), headers=auth)
        heard = await app_listening(a)
        first = asyncio.create_task(a.post("/v1/calls/call_1/tools", json=TOOL, headers=auth))
        asked = await asyncio.wait_for(heard.get(), 5)
        assert (asked.call, asked.id, asked.arguments) == ("call_1", "tc_1", {"day": "2026-12-02"})
        # the worker's answer was lost; it retries on the other replica while the app answers
        retry = asyncio.create_task(b.post("/v1/calls/call_1/tools", json=TOOL, headers=auth))
        await service(b).changes.wait_for(
            lambda: service(b).tools.waiting("call_1", "tc_1") == 1, 5
        )
        answer = await b.post(
            "/v1/calls/call_1/tools/tc_1/result",
            json={"result": {"booked": True}},
            headers=bearer(keys.app),
        )
        assert answer.status_code == 200
        one, two = (await first).json(), (await retry).json()
        assert one == two == answer.json()
        assert one["result"] == {"booked": True}
        # a retry after the answer gets the logged tool.result, and the app never hears it again
        late = await a.post("/v1/calls/call_1/tools", json=TOOL, headers=auth)
        assert late.json() == one
        await service(a).bus.client.flush()
        assert heard.empty()
        assert (await kinds(a, keys)).count("tool.call") == 1
        assert (await kinds(a, keys)).count("tool.result") == 1


async def test_a_second_answer_from_the_app_gets_the_first(call_log: Replica, keys: Keys) -> None:
    auth = bearer(keys.production)
    await call_log.post("/v1/calls", json=opening(), headers=auth)
    heard = await app_listening(call_log)
    asking = asyncio.create_task(call_log.post("/v1/calls/call_1/tools", json=TOOL, headers=auth))
    await asyncio.wait_for(heard.get(), 5)
    path, app = "/v1/calls/call_1/tools/tc_1/result", bearer(keys.app)
    first = await call_log.post(path, json={"result": 1}, headers=app)
    second = await call_log.post(path, json={"result": 2}, headers=app)
    assert first.json() == second.json() == (await asking).json()
    assert first.json()["result"] == 1


async def test_a_tool_nobody_answers_waits_its_timeout_and_logs_one_timeout(
    replica: Start, keys: Keys
) -> None:
    auth = bearer(keys.production)
    quick = TOOL | {"timeout_s": 0.2}
    async with replica() as a, replica() as b:
        await a.post("/v1/calls", json=opening(), headers=auth)
        answers = await asyncio.gather(
            a.post("/v1/calls/call_1/tools", json=quick, headers=auth),
            b.post("/v1/calls/call_1/tools", json=quick, headers=auth),
        )
        assert {r.status_code for r in answers} == {200}
        assert answers[0].json() == answers[1].json()
        assert answers[0].json()["error"] == "timeout"
        assert (await kinds(a, keys)).count("tool.result") == 1


async def test_metrics_time_the_tool_round_trip_and_the_batch_and_count_call_backs(
    call_log: Replica, keys: Keys
) -> None:
    """call-log's /metrics: the registry's names and labels (pinecall_contracts.metrics), a tool
    call's round trip and a batch's write timed, a call back counted once however often asked."""
    auth = bearer(keys.production)
    await call_log.post("/v1/calls", json=opening(), headers=auth)
    await call_log.post("/v1/calls/call_1/entries", json=batch(0, 3), headers=auth)
    heard = await app_listening(call_log)
    asking = asyncio.create_task(call_log.post("/v1/calls/call_1/tools", json=TOOL, headers=auth))
    await asyncio.wait_for(heard.get(), 5)
    path = "/v1/calls/call_1/tools/tc_1/result"
    await call_log.post(path, json={"result": 1}, headers=bearer(keys.app))
    assert (await asking).status_code == 200
    body = {"agent": "support-bot", "call": "call_1", "number": "+15550100", "reason": "full"}
    for _ in range(2):
        r = await call_log.post("/v1/callbacks", json=body, headers=bearer(keys.app))
        assert r.status_code == 200
    text = (await call_log.get("/metrics")).text
    assert unregistered(text, "call-log") == []
    assert 'pinecall_tool_round_trip_seconds_count{environment="production"} 1.0' in text
    assert "pinecall_call_log_batch_write_seconds_count 1.0" in text
    assert 'pinecall_callbacks_total{environment="production"} 1.0' in text
    assert "pinecall_call_log_write_errors_total 0.0" in text
