"""A worker's relay (``pinecall_clients.relay``) against two real replicas (issue 20): its calls'
batches go as one request, and each writer hears what its batch alone would have heard, through
lost answers, 5xx, 409s, unknown calls and a body one batch spoils."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager

import pytest

from pinecall_clients.calllog import Backoff, CallLogClient
from pinecall_clients.errors import BatchRefused, CallLogRefused, CallLogUnavailable
from pinecall_clients.relay import BatchRelay
from pinecall_contracts.calls import Entry, EntryBatch, Reopened
from pinecall_testkit.call_log import Keys, Replica, bearer, call_open
from pinecall_testkit.faults import FaultyTransport

Start = Callable[[], AbstractAsyncContextManager[Replica]]
QUICK = Backoff(first=0.01, most=0.02, jitter=0.0)
CALLS = [f"call_{i}" for i in range(8)]


@pytest.fixture
async def pair(replica: Start) -> AsyncIterator[tuple[Replica, Replica]]:
    async with replica() as a, replica() as b:
        yield a, b


@pytest.fixture
async def relayed(
    pair: tuple[Replica, Replica], keys: Keys
) -> AsyncIterator[tuple[CallLogClient, BatchRelay, FaultyTransport]]:
    transport = FaultyTransport([pair[0].app, pair[1].app])
    log = CallLogClient("http://call-log.test", keys.production, transport=transport, backoff=QUICK)
    relay = BatchRelay(log)
    async with log:
        for call in CALLS:
            await log.open(call_open(call))
        yield log, relay, transport
        await relay.aclose()


async def counted(replica: Replica, keys: Keys, call: str) -> list[int]:
    log = (await replica.get(f"/v1/calls/{call}/entries", headers=bearer(keys.operator))).json()
    return [e["data"]["n"] for e in log["entries"] if e["counted"] is not None]


def posted(transport: FaultyTransport) -> list[str]:
    return [p for m, p, _ in transport.sent if p.endswith("entries")]


async def test_a_ticks_batches_go_as_one_request_each_written_once_through_faults(
    relayed: tuple[CallLogClient, BatchRelay, FaultyTransport],
    pair: tuple[Replica, Replica],
    keys: Keys,
) -> None:
    log, relay, transport = relayed
    writers = [log.writer(call, sender=relay) for call in CALLS]
    for tick, faults in enumerate((["lose"], ["drop", "503", "lose"], [], ["502"])):
        transport.then(*faults)
        for w in writers:
            w.add("transcript.user", {"n": 2 * tick})
            w.add("transcript.user", {"n": 2 * tick + 1})
        answers = await asyncio.gather(*(w.flush() for w in writers))
        assert [a.written if a else None for a in answers] == [2 * tick + 2] * len(CALLS)
    for call in CALLS:
        assert await counted(pair[0], keys, call) == list(range(8))
    # one request a tick, each retry the same request unchanged: 2 + 4 + 1 + 2 sent
    assert (relay.requests, relay.batches) == (4, 4 * len(CALLS))
    assert posted(transport) == ["/v1/entries"] * 9


async def test_each_writer_hears_its_own_409_and_404_and_the_others_are_written(
    relayed: tuple[CallLogClient, BatchRelay, FaultyTransport],
    pair: tuple[Replica, Replica],
    keys: Keys,
) -> None:
    log, relay, transport = relayed
    good = log.writer("call_0", sender=relay)
    ahead = log.writer("call_1", sender=relay, written=5)  # a gap: 409 naming both counts
    said = Reopened(agent="support-bot", context={})
    old = log.writer("old_1", written=3, reopen=said, sender=relay)  # 404, said again once
    for w in (good, ahead, old):
        w.add("transcript.user", {"n": w.written})
    answers = await asyncio.gather(good.flush(), ahead.flush(), old.flush())
    assert answers[0] is not None
    assert answers[0].written == 1
    assert answers[1] is None
    ((_, refused),) = ahead.refused
    assert isinstance(refused, BatchRefused)
    assert (refused.written, refused.after) == (0, 5)
    assert ahead.written == 0  # it goes on from the log's count
    assert answers[2] is not None
    assert answers[2].written == 4
    assert await counted(pair[0], keys, "call_0") == [0]
    assert await counted(pair[0], keys, "call_1") == []
    assert await counted(pair[0], keys, "old_1") == [3]
    reopens = [p for _, p, _ in transport.sent if p.endswith("/reopened")]
    assert reopens == ["/v1/calls/old_1/reopened"]


async def test_a_body_one_batch_spoils_is_asked_again_batch_by_batch(
    relayed: tuple[CallLogClient, BatchRelay, FaultyTransport],
    pair: tuple[Replica, Replica],
    keys: Keys,
) -> None:
    _, relay, transport = relayed
    now = dt.datetime.now(dt.UTC)
    clean = EntryBatch(after=0, entries=[Entry(kind="transcript.user", ts=now, data={"n": 0})])
    spoilt = EntryBatch(
        after=0, entries=[Entry(kind="transcript.user", ts=now, data={"text": "a\x00b"})]
    )
    answers = await asyncio.gather(
        relay.write_batch("call_0", clean, within_s=None),
        relay.write_batch("call_1", spoilt, within_s=None),
        relay.write_batch("call_2", clean, within_s=None),
        return_exceptions=True,
    )
    assert not isinstance(answers[0], BaseException)
    assert answers[0].written == 1
    assert isinstance(answers[1], CallLogRefused)
    assert answers[1].status == 422
    assert not isinstance(answers[2], BaseException)
    assert answers[2].written == 1
    assert posted(transport) == [
        "/v1/entries",
        "/v1/calls/call_0/entries",
        "/v1/calls/call_1/entries",
        "/v1/calls/call_2/entries",
    ]
    assert await counted(pair[0], keys, "call_1") == []
    assert await counted(pair[0], keys, "call_2") == [0]


async def test_a_writer_that_stops_waiting_sends_again_and_the_log_writes_once(
    relayed: tuple[CallLogClient, BatchRelay, FaultyTransport],
    pair: tuple[Replica, Replica],
    keys: Keys,
) -> None:
    log, relay, _ = relayed
    writer = log.writer("call_0", sender=relay, batch_timeout_s=0.001)
    writer.add("transcript.user", {"n": 0})
    with pytest.raises(CallLogUnavailable):
        await writer.flush()  # its wait (1 ms) ends inside the relay's gathering (5 ms)
    patient = log.writer("call_0", sender=relay)  # the same count: the batch again
    patient.add("transcript.user", {"n": 0})
    answer = await patient.flush()
    assert answer is not None
    assert answer.written == 1
    assert await counted(pair[0], keys, "call_0") == [0]
