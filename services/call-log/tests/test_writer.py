"""The workers' writer (``pinecall_clients.calllog``) against two real replicas (issue 5, "The
writer, for workers"): answers lost, nothing answering, 5xx, retries landing on the other replica;
409 and 404 as answers; a writer following on from another's count; tool calls and the seal."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager

import pytest

from pinecall_clients.calllog import Backoff, CallLogClient
from pinecall_clients.errors import CallUnknown
from pinecall_contracts.base import encode
from pinecall_contracts.calls import (
    MAX_ENTRY_BYTES,
    OMITTED,
    CallOpen,
    Reopened,
    ToolAsked,
    ToolCall,
)
from pinecall_testkit.call_log import Keys, Replica, bearer
from pinecall_testkit.faults import FaultyTransport

Start = Callable[[], AbstractAsyncContextManager[Replica]]
QUICK = Backoff(first=0.01, most=0.02, jitter=0.0)
OPEN = CallOpen(
    call="call_1",
    agent="support-bot",
    org="org_acme",
    environment="production",
    room="room-1",
    worker="pinecall/worker-a.1791067258",
)


@pytest.fixture
async def pair(replica: Start) -> AsyncIterator[tuple[Replica, Replica]]:
    async with replica() as a, replica() as b:
        yield a, b


def client(pair: tuple[Replica, Replica], keys: Keys) -> tuple[CallLogClient, FaultyTransport]:
    transport = FaultyTransport([pair[0].app, pair[1].app])
    return (
        CallLogClient("http://call-log.test", keys.production, transport=transport, backoff=QUICK),
        transport,
    )


async def counted(replica: Replica, keys: Keys, call: str = "call_1") -> list[int]:
    log = (await replica.get(f"/v1/calls/{call}/entries", headers=bearer(keys.operator))).json()
    return [e["data"]["n"] for e in log["entries"] if e["counted"] is not None]


async def test_lost_answers_silence_and_5xx_are_retried_unchanged_and_write_once(
    pair: tuple[Replica, Replica], keys: Keys
) -> None:
    log, transport = client(pair, keys)
    async with log:
        await log.open(OPEN)
        writer = log.writer("call_1")
        n = 0
        for faults in (["lose"], ["drop", "503", "lose"], ["502", "lose", "502"], [], ["lose"]):
            transport.then(*faults)
            for _ in range(3):
                writer.add("transcript.user", {"n": n})
                n += 1
            answer = await writer.flush()
            assert answer is not None
            assert len(answer.seqs) == 3
        assert writer.written == n == 15
        assert await counted(pair[0], keys) == list(range(15))
        # every retry was the same batch after the same count
        posted = [p for m, p, _ in transport.sent if p.endswith("/entries")]
        assert len(posted) == 5 + 1 + 3 + 3 + 0 + 1


async def test_a_409_refuses_the_whole_batch_and_the_writer_goes_on_from_the_log_count(
    pair: tuple[Replica, Replica], keys: Keys
) -> None:
    log, _ = client(pair, keys)
    async with log:
        await log.open(OPEN)
        writer = log.writer("call_1", written=3)  # a count the log never gave
        writer.add("transcript.user", {"n": 99})
        assert await writer.flush() is None
        ((batch, refusal),) = writer.refused
        assert (batch.after, refusal.written, refusal.after) == (3, 0, 3)
        writer.add("transcript.user", {"n": 0})
        assert (await writer.flush()) is not None
        assert await counted(pair[1], keys) == [0]


async def test_a_writer_follows_on_from_another_writers_count(
    pair: tuple[Replica, Replica], keys: Keys
) -> None:
    log, _ = client(pair, keys)
    async with log:
        await log.open(OPEN)
        first = log.writer("call_1")
        for n in range(4):
            first.add("transcript.user", {"n": n})
        await first.flush()
        record = (await pair[0].get("/v1/calls/call_1", headers=bearer(keys.operator))).json()
        overflow = log.writer("call_1", written=record["written"])  # the dispatch carries it
        overflow.add("overflow.said", {"n": 4})
        await overflow.flush()
        assert await counted(pair[0], keys) == [0, 1, 2, 3, 4]


async def test_a_call_the_log_does_not_hold_is_said_again_once(
    pair: tuple[Replica, Replica], keys: Keys
) -> None:
    log, transport = client(pair, keys)
    async with log:
        said = Reopened(agent="support-bot", context={"caller": "+15550100"})
        writer = log.writer("old_1", written=7, reopen=said)
        writer.add("transcript.user", {"n": 7})
        answer = await writer.flush()
        assert answer is not None
        assert answer.written == 8
        writer.add("transcript.user", {"n": 8})
        await writer.flush()
        reopens = [p for _, p, _ in transport.sent if p.endswith("/reopened")]
        assert reopens == ["/v1/calls/old_1/reopened"]
        assert await counted(pair[0], keys, "old_1") == [7, 8]
        # without what to say, a 404 is the answer
        stranger = log.writer("old_2")
        stranger.add("transcript.user")
        with pytest.raises(CallUnknown):
            await stranger.flush()


async def test_a_tool_retried_after_its_answer_was_lost_gets_the_logged_result_once(
    pair: tuple[Replica, Replica], keys: Keys
) -> None:
    a, _ = pair
    bus = a.app.state.call_log.bus
    heard: asyncio.Queue[ToolAsked] = asyncio.Queue()

    async def app(asked: ToolAsked) -> None:  # the app: hears the tool call, answers it
        await heard.put(asked)
        await a.post(
            f"/v1/calls/{asked.call}/tools/{asked.id}/result",
            json={"result": {"booked": True}},
            headers=bearer(keys.app),
        )

    await bus.subscribe(bus.subjects.tool_asked("production", "support-bot"), ToolAsked, app)
    await bus.client.flush()
    log, transport = client(pair, keys)
    async with log:
        await log.open(OPEN)
        transport.then("lose", "503")
        result = await log.tool("call_1", ToolCall(id="tc_1", name="book_slot", timeout_s=10))
        assert result.result == {"booked": True}
        assert heard.qsize() == 1
        transport.then("lose")
        sealed = await log.seal("call_1", "completed")
        assert sealed.state == "sealed"
    entries = (await a.get("/v1/calls/call_1/entries", headers=bearer(keys.operator))).json()
    kinds = [e["kind"] for e in entries["entries"]]
    assert kinds == ["call.started", "tool.call", "tool.result", "call.ended", "call.sealed"]


async def test_a_nul_is_written_as_u_fffd_and_a_batch_the_log_cannot_take_is_dropped(
    pair: tuple[Replica, Replica], keys: Keys
) -> None:
    """Postgres stores no NUL character: the writer writes U+FFFD in its place rather than have
    the batch refused. A batch the log refuses for itself (400, 413, 422) would be refused again
    unchanged: it is dropped, and the call's later entries are written after the same count."""
    log, _ = client(pair, keys)
    async with log:
        await log.open(OPEN)
        writer = log.writer("call_1")
        writer.add("turn.user", {"text": "Hi\x00 there", "n": 0, "said\x00": ["\x00"]})
        assert (await writer.flush()) is not None
        writer.add("Not A Kind", {"n": 99})  # the log's 400
        assert await writer.flush() is None
        [(dropped, answer)] = writer.dropped
        assert ([e.kind for e in dropped.entries], answer.status) == (["Not A Kind"], 400)
        writer.add("turn.user", {"n": 1})
        written = await writer.flush()
        assert written is not None
        assert written.written == 2
        assert writer.refused == []
    entries = (await pair[1].get("/v1/calls/call_1/entries", headers=bearer(keys.operator))).json()[
        "entries"
    ]
    ours = [e["data"] for e in entries if e["counted"] is not None]
    assert ours == [{"text": "Hi\ufffd there", "n": 0, "said\ufffd": ["\ufffd"]}, {"n": 1}]


async def test_an_entry_too_big_for_the_log_is_written_without_its_data_and_stops_nothing(
    pair: tuple[Replica, Replica], keys: Keys
) -> None:
    """call-log refuses an entry over ``MAX_ENTRY_BYTES`` (422), and with it the batch: the
    writer queues such an entry with its size in place of its data, so the turns around it stay
    on the log; entries near the bound go in batches under the body cap (10 MB), never a 413."""
    log, _ = client(pair, keys)
    async with log:
        await log.open(OPEN)
        writer = log.writer("call_1")
        writer.add("turn.user", {"n": 0})
        writer.add("turn.agent", {"n": 1, "text": "x" * 9_500_000})
        writer.add("turn.user", {"n": 2})
        for n in range(3, 203):  # 200 × 60 kB: 12 MB queued
            writer.add("turn.agent", {"n": n, "text": "y" * 60_000})
        await writer.drain()
        assert (writer.dropped, writer.refused, writer.written) == ([], [], 203)
    entries = (await pair[1].get("/v1/calls/call_1/entries", headers=bearer(keys.operator))).json()[
        "entries"
    ]
    ours = [e["data"] for e in entries if e["counted"] is not None]
    assert ours[:3] == [
        {"n": 0},
        {OMITTED: len(encode({"n": 1, "text": "x" * 9_500_000})), "over": MAX_ENTRY_BYTES},
        {"n": 2},
    ]
    assert [d["n"] for d in ours[3:]] == list(range(3, 203))
