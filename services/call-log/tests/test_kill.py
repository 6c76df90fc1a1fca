"""A replica SIGKILLed in the middle of a batch, the batch retried on the other (issue 5,
acceptance 2): nothing lost, nothing doubled. Replicas here are real Granian processes."""

from __future__ import annotations

import asyncio

import httpx
import psycopg
import stamina

from pinecall_call_log.testing import Keys, batch, bearer, opening, served


async def test_a_replica_killed_mid_batch_loses_and_doubles_nothing(
    database_url: str, nats_url: str, nats_namespace: str, keys: Keys
) -> None:
    env = {
        "PINECALL_DATABASE_URL": database_url,
        "PINECALL_NATS_URL": nats_url,
        "PINECALL_NATS_NAMESPACE": nats_namespace,
        "PINECALL_LOG_FORMAT": "text",
        "PINECALL_DB_POOL_SIZE": "2",
    }
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
