"""Replicas as real Granian processes, SIGKILLed: a batch retried on the other replica loses and
doubles nothing (issue 5, acceptance 2); an open caught waiting dies with its replica, so its
retry opens the call and says so; a page's stream resumes on the other replica with
Last-Event-ID, no gap and no repeat (acceptance 5)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import nats
import psycopg
import pytest

from pinecall_contracts.subjects import Subjects
from pinecall_testkit.call_log import (
    Keys,
    Process,
    batch,
    bearer,
    lock_waited_on,
    opening,
    replica_env,
    served,
)


@pytest.fixture
def env(database_url: str, nats_url: str, nats_namespace: str) -> dict[str, str]:
    return replica_env(database_url, nats_url, nats_namespace)


async def kill_while_held(
    database_url: str,
    a: Process,
    sending: asyncio.Task[httpx.Response],
    held: psycopg.AsyncConnection[Any],
) -> None:
    """Once ``a``'s request waits on a lock ``held`` holds, kill ``a``, see that its asker never
    heard an answer, and let the lock go."""
    await lock_waited_on(database_url)
    a.kill()
    await a.proc.wait()
    lost = await asyncio.gather(sending, return_exceptions=True)
    assert isinstance(lost[0], httpx.HTTPError)
    await held.rollback()


async def test_a_replica_killed_mid_batch_loses_and_doubles_nothing(
    env: dict[str, str], database_url: str, keys: Keys
) -> None:
    auth = bearer(keys.production)
    async with served(env) as (a, b), httpx.AsyncClient(timeout=30) as http:
        r = await http.post(f"{a.url}/v1/calls", json=opening(), headers=auth)
        assert r.status_code == 200
        await http.post(f"{a.url}/v1/calls/call_1/entries", json=batch(0, 2), headers=auth)
        async with await psycopg.AsyncConnection.connect(database_url) as held:
            # hold the call's head: replica a's batch is caught inside its transaction
            await held.execute("SELECT 1 FROM calllog.calls WHERE call_id = 'call_1' FOR UPDATE")
            sending = asyncio.create_task(
                http.post(f"{a.url}/v1/calls/call_1/entries", json=batch(2, 5), headers=auth)
            )
            await kill_while_held(database_url, a, sending, held)
        retried = await http.post(
            f"{b.url}/v1/calls/call_1/entries", json=batch(2, 5), headers=auth
        )
        assert retried.status_code == 200, retried.text
        # a's transaction died with it: the retry writes the batch, for the first time
        assert (retried.json()["seqs"], retried.json()["replayed"]) == ([4, 5, 6, 7, 8], False)
        log = (await http.get(f"{b.url}/v1/calls/call_1/entries", headers=auth)).json()
        assert [e["data"].get("n") for e in log["entries"]] == [None, *range(7)]


async def test_an_open_caught_waiting_dies_with_its_replica_and_its_retry_says_the_call_opened(
    env: dict[str, str], database_url: str, nats_url: str, nats_namespace: str, keys: Keys
) -> None:
    """The open is one statement (``OPEN_CALL``) in a transaction: were it in autocommit, a
    statement waiting on another's insert of its call would still commit once that insert was let
    go, after its replica died, and the retry on the other replica, finding the call opened,
    would say nothing of it (no ``opened`` event, no app socket told; a probe's finding)."""
    auth = bearer(keys.production)
    bus = await nats.connect(nats_url)
    heard = await bus.subscribe(Subjects(nats_namespace).call_event("opened", "call_1"))
    await bus.flush()
    try:
        async with served(env) as (a, b), httpx.AsyncClient(timeout=30) as http:
            async with await psycopg.AsyncConnection.connect(database_url) as held:
                # another's insert of the call, not committed: replica a's open waits on it
                await held.execute(
                    "INSERT INTO calllog.calls (call_id, agent, org, environment, room, worker,"
                    " context, config, opened_at)"
                    " VALUES ('call_1', 'x', 'x', 'production', 'x', 'x', '{}', '{}', now())"
                )
                sending = asyncio.create_task(
                    http.post(f"{a.url}/v1/calls", json=opening(), headers=auth)
                )
                await kill_while_held(database_url, a, sending, held)
            retried = await http.post(f"{b.url}/v1/calls", json=opening(), headers=auth)
            assert retried.status_code == 200, retried.text
            said = await heard.next_msg(timeout=10)  # b opened it: a's open died with a
            assert said.subject.endswith(".call_1")
            log = (await http.get(f"{b.url}/v1/calls/call_1/entries", headers=auth)).json()
            assert [e["kind"] for e in log["entries"]] == ["call.started"]
    finally:
        await bus.close()


async def events(response: httpx.Response) -> AsyncIterator[int]:
    """The ids of a Server-Sent Events response, one per event, as they arrive."""
    event_id = None
    async for line in response.aiter_lines():
        if line.startswith("id:"):
            event_id = int(line[3:].strip())
        elif not line and event_id is not None:
            yield event_id
            event_id = None


async def test_the_page_stream_resumes_on_the_other_replica_with_no_gap_and_no_repeat(
    env: dict[str, str], keys: Keys
) -> None:
    auth = bearer(keys.production)
    async with served(env) as (a, b), httpx.AsyncClient(timeout=30) as http:
        await http.post(f"{a.url}/v1/calls", json=opening(), headers=auth)
        await http.post(f"{a.url}/v1/calls/call_1/entries", json=batch(0, 3), headers=auth)
        minted = await http.post(f"{a.url}/v1/calls/call_1/log-token", headers=bearer(keys.app))
        token = {"log_token": minted.json()["token"]}
        seen: list[int] = []
        cut = None
        async with http.stream("GET", f"{a.url}/v1/calls/call_1/stream", params=token) as page:
            assert page.headers["content-type"].startswith("text/event-stream")
            try:
                async for seq in events(page):
                    seen.append(seq)
                    if seq == 4:  # caught up: the worker writes on through the other replica
                        await http.post(
                            f"{b.url}/v1/calls/call_1/entries", json=batch(3, 3), headers=auth
                        )
                    if seq == 6:  # mid-way through that batch, the replica dies
                        a.kill()
                        await a.proc.wait()
            except httpx.HTTPError as exc:
                cut = exc
        assert cut is not None, "the stream ended without being cut"
        await http.post(f"{b.url}/v1/calls/call_1/entries", json=batch(6, 2), headers=auth)
        await http.post(
            f"{b.url}/v1/calls/call_1/seal", json={"outcome": "completed"}, headers=auth
        )
        again = {"Last-Event-ID": str(seen[-1])}
        url = f"{b.url}/v1/calls/call_1/stream"
        async with http.stream("GET", url, params=token, headers=again) as page:
            seen.extend([seq async for seq in events(page)])  # to the seal, then the stream ends
        assert seen == list(range(1, 12))
