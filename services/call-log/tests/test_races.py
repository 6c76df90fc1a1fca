"""The one-statement paths (issue 20) against their races: a call opened, a tool asked and
answered, a call ended and sealed, each by many requests at once on two replicas. One request
writes; every other is judged under the head's lock and answered what was written; the log
takes each seq once, with no gap where a statement that moved the head was rolled back."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from pinecall_testkit.call_log import Keys, Replica, bearer, opening

Start = Callable[[], AbstractAsyncContextManager[Replica]]
AT_ONCE = 12
TOOL = {"id": "tc_1", "name": "book_slot", "arguments": {"day": "2026-12-02"}, "timeout_s": 30}


async def log_of(replica: Replica, keys: Keys, call: str = "call_1") -> list[dict[str, Any]]:
    r = await replica.get(f"/v1/calls/{call}/entries", headers=bearer(keys.operator))
    assert r.status_code == 200, r.text
    return list(r.json()["entries"])


async def whole(replica: Replica, keys: Keys, *kinds: str) -> list[dict[str, Any]]:
    """The log of call_1 is ``kinds`` at seqs 1, 2, …, and its head stands at the last: no seq
    taken twice, none skipped, none taken for nothing."""
    entries = await log_of(replica, keys)
    assert [e["kind"] for e in entries] == list(kinds)
    assert [e["seq"] for e in entries] == list(range(1, len(kinds) + 1))
    head = await replica.get("/v1/calls/call_1", headers=bearer(keys.production))
    assert head.json()["last_seq"] == len(kinds)
    return entries


async def test_a_call_opened_by_many_at_once_is_opened_once_and_answered_alike(
    replica: Start, keys: Keys
) -> None:
    auth = bearer(keys.production)
    async with replica() as a, replica() as b:
        answers = await asyncio.gather(
            *(
                (a, b)[i % 2].post("/v1/calls", json=opening(), headers=auth)
                for i in range(AT_ONCE)
            ),
            b.post("/v1/calls", json=opening(worker="pinecall/worker-b.1"), headers=auth),
        )
        *alike, other = answers
        assert {r.status_code for r in alike} == {200}, [r.text for r in alike]
        assert len({r.content for r in alike}) == 1
        assert other.status_code == 409, other.text
        await whole(a, keys, "call.started")
        assert alike[0].json()["last_seq"] == 1


async def test_a_tool_asked_by_many_at_once_is_asked_once_and_times_out_once(
    replica: Start, keys: Keys
) -> None:
    auth = bearer(keys.production)
    quick = TOOL | {"timeout_s": 0.3}
    async with replica() as a, replica() as b:
        await a.post("/v1/calls", json=opening(), headers=auth)
        answers = await asyncio.gather(
            *(
                (a, b)[i % 2].post("/v1/calls/call_1/tools", json=quick, headers=auth)
                for i in range(AT_ONCE)
            )
        )
        assert {r.status_code for r in answers} == {200}, [r.text for r in answers]
        assert len({r.content for r in answers}) == 1
        assert answers[0].json()["error"] == "timeout"
        await whole(a, keys, "call.started", "tool.call", "tool.result")
        assert answers[0].json()["seq"] == 3


async def test_a_tool_answered_by_many_at_once_takes_one_answer_and_each_hears_it(
    replica: Start, keys: Keys
) -> None:
    auth, app = bearer(keys.production), bearer(keys.app)
    async with replica() as a, replica() as b:
        await a.post("/v1/calls", json=opening(), headers=auth)
        asking = asyncio.create_task(a.post("/v1/calls/call_1/tools", json=TOOL, headers=auth))
        service = a.app.state.call_log
        await service.changes.wait_for(lambda: service.tools.waiting("call_1", "tc_1") == 1, 5)
        path = "/v1/calls/call_1/tools/tc_1/result"
        answers = await asyncio.gather(
            *(
                (a, b)[i % 2].post(path, json={"result": {"n": i}}, headers=app)
                for i in range(AT_ONCE)
            )
        )
        assert {r.status_code for r in answers} == {200}, [r.text for r in answers]
        assert len({r.content for r in answers}) == 1
        asked = await asking
        assert asked.json() == answers[0].json()
        entries = await whole(a, keys, "call.started", "tool.call", "tool.result")
        assert entries[2]["data"]["result"] == asked.json()["result"]


async def test_a_call_ended_and_sealed_by_many_at_once_ends_once_and_seals_once(
    replica: Start, keys: Keys
) -> None:
    auth = bearer(keys.production)
    async with replica() as a, replica() as b:
        await a.post("/v1/calls", json=opening(), headers=auth)
        answers = await asyncio.gather(
            *(
                (a, b)[i % 2].post(
                    f"/v1/calls/call_1/{('end', 'seal')[i % 3 == 2]}",
                    json={"outcome": ("completed", "caller_hangup")[i % 2]},
                    headers=auth,
                )
                for i in range(AT_ONCE)
            )
        )
        # an end after the seal is refused (a sealed call changes no more); nothing else is
        assert {r.status_code for r in answers} <= {200, 409}, [r.text for r in answers]
        assert any(r.status_code == 200 for r in answers)
        entries = await whole(a, keys, "call.started", "call.ended", "call.sealed")
        sealed = (await a.get("/v1/calls/call_1", headers=auth)).json()
        assert (sealed["state"], sealed["outcome"]) == ("sealed", entries[1]["data"]["outcome"])
