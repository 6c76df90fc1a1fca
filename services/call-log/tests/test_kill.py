"""Replicas as real Granian processes, SIGKILLed: a batch retried on the other replica loses and
doubles nothing (issue 5, acceptance 2); a page's stream resumes on the other replica with
Last-Event-ID, no gap and no repeat (acceptance 5)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import psycopg
import pytest
import stamina

from pinecall_testkit.call_log import Keys, batch, bearer, opening, replica_env, served


@pytest.fixture
def env(database_url: str, nats_url: str, nats_namespace: str) -> dict[str, str]:
    return replica_env(database_url, nats_url, nats_namespace)


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
            async with await psycopg.AsyncConnection.connect(database_url) as probe:
                async for attempt in stamina.retry_context(
                    on=AssertionError, attempts=None, timeout=20, wait_initial=0.05, wait_max=0.1
                ):
                    with attempt:  # no event says "a backend waits on this lock": ask Postgres
                        waiting = await (
                            await probe.execute(
                                "SELECT count(*) FROM pg_locks WHERE NOT granted"
                                " AND pid <> pg_backend_pid()"
                            )
                        ).fetchone()
                        assert waiting is not None
                        assert waiting[0] >= 1
            a.kill()
            await a.proc.wait()
            lost = await asyncio.gather(sending, return_exceptions=True)
            assert isinstance(lost[0], httpx.HTTPError)  # the writer never heard an answer
            await held.rollback()
        retried = await http.post(
            f"{b.url}/v1/calls/call_1/entries", json=batch(2, 5), headers=auth
        )
        assert retried.status_code == 200, retried.text
        # a's transaction died with it: the retry writes the batch, for the first time
        assert (retried.json()["seqs"], retried.json()["replayed"]) == ([4, 5, 6, 7, 8], False)
        log = (await http.get(f"{b.url}/v1/calls/call_1/entries", headers=auth)).json()
        assert [e["data"].get("n") for e in log["entries"]] == [None, *range(7)]


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
