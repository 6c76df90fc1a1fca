"""The worker's relay socket (``pinecall_worker.relay``) against a real call-log process: job
processes' writers speak to it as to call-log, their batches go on as one request, and each hears
its own batch's answer (issue 20)."""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import AsyncIterator

import httpx
import pytest

from pinecall_clients.calllog import CallLogClient
from pinecall_clients.errors import CallUnknown
from pinecall_testkit.call_log import TS, Process, call_open
from pinecall_testkit.roster import Keys
from pinecall_worker.call.record import FLUSH_EVERY_S, tick_phase, to_tick
from pinecall_worker.relay import RelaySocket, relay_client

CALLS = [f"relay_{i}" for i in range(6)]


@pytest.fixture
async def socket(
    call_log: Process, keys: Keys, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[tuple[RelaySocket, CallLogClient]]:
    path = tmp_path_factory.mktemp("relay", numbered=True) / "r.sock"
    log = CallLogClient(call_log.url, keys.production)
    for call in CALLS:
        await log.open(call_open(call))
    relay = RelaySocket(path, log)
    relay.relay.gather_s = 0.5  # the jobs' requests cross a socket: a tick is theirs however slow
    await relay.start()
    try:
        yield relay, log
    finally:
        await relay.close()
        await log.aclose()


async def test_jobs_batches_go_as_one_request_and_each_writer_hears_its_own(
    socket: tuple[RelaySocket, CallLogClient], call_log: Process, keys: Keys
) -> None:
    relay, log = socket
    assert stat.S_IMODE(os.stat(relay.path).st_mode) == 0o600
    jobs = [relay_client(str(relay.path), keys.production) for _ in CALLS]  # a client a job
    try:
        writers = [log.writer(call, sender=job) for call, job in zip(CALLS, jobs, strict=True)]
        for w in writers:
            w.add("transcript.user", {"n": 0})
            w.add("transcript.user", {"n": 1})
        answers = await asyncio.gather(*(w.flush() for w in writers))
        assert [a.written if a else None for a in answers] == [2] * len(CALLS)
        assert (relay.relay.requests, relay.relay.batches) == (1, len(CALLS))
        stranger = log.writer("relay_unknown", sender=jobs[0])
        stranger.add("transcript.user")
        with pytest.raises(CallUnknown):
            await stranger.flush()
        behind = log.writer(CALLS[0], sender=jobs[0])  # another writer at count 0: a 409
        behind.add("transcript.user", {"n": 9})
        assert await behind.flush() is None
        ((_, refused),) = behind.refused
        assert (refused.written, refused.after) == (2, 0)
    finally:
        for job in jobs:
            await job.aclose()
    for call in CALLS:
        entries = (await log.entries(call, within_s=5)).entries
        assert [e.data["n"] for e in entries if e.counted is not None] == [0, 1]


async def test_a_body_that_is_no_batch_is_a_400_problem(
    socket: tuple[RelaySocket, CallLogClient],
) -> None:
    relay, _ = socket
    transport = httpx.AsyncHTTPTransport(uds=str(relay.path))
    async with httpx.AsyncClient(transport=transport, base_url="http://relay.worker") as job:
        r = await job.post("/v1/calls/relay_0/entries", content=b'{"after": -1}')
    assert r.status_code == 400
    assert r.headers["content-type"].startswith("application/problem+json")
    assert r.json()["status"] == 400
    assert relay.relay.requests == 0


def test_a_workers_calls_flush_on_its_tick_and_workers_ticks_differ() -> None:
    a, b = tick_phase("pinecall/worker-a.1791067258"), tick_phase("pinecall/worker-b.1791067258")
    assert 0 <= a < FLUSH_EVERY_S
    assert a != b
    assert to_tick(a, now=1000.0 + a) == FLUSH_EVERY_S  # at its tick: the next one
    assert to_tick(a, now=1000.0 + a - 0.25) == pytest.approx(0.25)
    assert to_tick(0.5, now=1000.75) == pytest.approx(0.75)


async def test_a_bad_call_id_is_its_jobs_own_400_and_a_bad_traceparent_stops_no_batch(
    socket: tuple[RelaySocket, CallLogClient], call_log: Process, keys: Keys
) -> None:
    relay, log = socket
    transport = httpx.AsyncHTTPTransport(uds=str(relay.path))
    body = {"after": 0, "entries": [{"kind": "transcript.user", "ts": TS, "data": {"n": 0}}]}
    async with httpx.AsyncClient(transport=transport, base_url="http://relay.worker") as job:
        bad = await job.post("/v1/calls/bad%20id/entries", json=body)
        odd, fine = await asyncio.gather(  # one tick: one job's header is no traceparent
            job.post(
                f"/v1/calls/{CALLS[0]}/entries", json=body, headers={"traceparent": "0" * 600}
            ),
            job.post(f"/v1/calls/{CALLS[1]}/entries", json=body),
        )
    assert bad.status_code == 400
    assert "no call id" in bad.json()["detail"]
    assert (odd.status_code, fine.status_code) == (200, 200)
    assert relay.relay.requests == 1  # the two batches went together, neither refused
    for call in CALLS[:2]:
        entries = (await log.entries(call, within_s=5)).entries
        assert [e.data["n"] for e in entries if e.counted is not None] == [0]


async def test_closing_answers_a_held_batch_503_at_once(
    keys: Keys, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A batch held while the worker stops is answered 503 by the close, not by its 4 s wait,
    and the job sends it again to whoever runs its call."""
    sent, never = asyncio.Event(), asyncio.Event()

    async def hang(_: httpx.Request) -> httpx.Response:
        sent.set()
        await never.wait()  # a call-log that never answers
        raise AssertionError("unreachable")

    path = tmp_path_factory.mktemp("relay", numbered=True) / "r.sock"
    log = CallLogClient(
        "http://call-log.test", keys.production, transport=httpx.MockTransport(hang)
    )
    relay = RelaySocket(path, log)
    await relay.start()
    body = {"after": 0, "entries": [{"kind": "transcript.user", "ts": TS, "data": {"n": 0}}]}
    try:
        transport = httpx.AsyncHTTPTransport(uds=str(path))
        async with httpx.AsyncClient(transport=transport, base_url="http://relay.worker") as job:
            held = asyncio.create_task(job.post(f"/v1/calls/{CALLS[0]}/entries", json=body))
            await sent.wait()
            await relay.close()
            answer = await held
    finally:
        await relay.close()
        await log.aclose()
    assert answer.status_code == 503
    assert "the worker's relay closed" in answer.json()["detail"]
