"""Two call-log replicas on one Postgres and NATS (issue 5, acceptance 2).

Concurrent retries of one batch on both replicas write it once; writers whose answers are lost at
random, retrying on whichever replica, leave each log equal to their entries, once each, in order.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

import pytest

from pinecall_testkit.call_log import Keys, Replica, batch, bearer, opening

Start = Callable[[], AbstractAsyncContextManager[Replica]]


async def test_concurrent_retries_of_one_batch_on_two_replicas_write_it_once(
    replica: Start, keys: Keys
) -> None:
    auth = bearer(keys.production)
    async with replica() as a, replica() as b:
        assert (await a.post("/v1/calls", json=opening(), headers=auth)).status_code == 200
        body = batch(0, 5)
        answers = await asyncio.gather(
            *[
                (a if i % 2 else b).post("/v1/calls/call_1/entries", json=body, headers=auth)
                for i in range(12)
            ]
        )
        assert {r.status_code for r in answers} == {200}
        assert {tuple(r.json()["seqs"]) for r in answers} == {(2, 3, 4, 5, 6)}
        assert sum(not r.json()["replayed"] for r in answers) == 1
        log = (await b.get("/v1/calls/call_1/entries", headers=bearer(keys.operator))).json()
        assert [e["data"].get("n") for e in log["entries"]] == [None, 0, 1, 2, 3, 4]


async def _writer(
    rng: random.Random, replicas: list[Replica], call: str, auth: dict[str, str], total: int
) -> None:
    """One call's writer: batches of 1–6, each answer lost with p=0.4 and the batch retried on a
    random replica (sometimes two copies at once), until answered."""
    assert (
        await rng.choice(replicas).post("/v1/calls", json=opening(call), headers=auth)
    ).status_code == 200
    written = 0
    while written < total:
        body = batch(written, min(rng.randint(1, 6), total - written))
        while True:
            copies = rng.choice([1, 1, 2])
            answers = await asyncio.gather(
                *[
                    rng.choice(replicas).post(f"/v1/calls/{call}/entries", json=body, headers=auth)
                    for _ in range(copies)
                ]
            )
            assert all(r.status_code == 200 for r in answers), [r.text for r in answers]
            if rng.random() < 0.4:
                continue  # the answer was lost: the same batch again, after the same count
            written = answers[0].json()["written"]
            break


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_lost_answers_and_retries_on_either_replica_leave_every_log_exact(
    replica: Start, keys: Keys, seed: int
) -> None:
    rng = random.Random(seed)
    auth = bearer(keys.production)
    async with replica() as a, replica() as b:
        calls = [f"call_{seed}_{i}" for i in range(6)]
        totals = {call: rng.randint(5, 30) for call in calls}
        await asyncio.gather(
            *[
                _writer(random.Random(rng.random()), [a, b], call, auth, totals[call])
                for call in calls
            ]
        )
        for call in calls:
            log = (await a.get(f"/v1/calls/{call}/entries", headers=bearer(keys.operator))).json()
            counted = [e for e in log["entries"] if e["counted"] is not None]
            assert [e["data"]["n"] for e in counted] == list(range(totals[call]))
            assert [e["seq"] for e in log["entries"]] == list(range(1, len(log["entries"]) + 1))


async def test_a_replica_that_never_saw_the_call_serves_it_from_one_read(
    replica: Start, keys: Keys
) -> None:
    auth = bearer(keys.production)
    async with replica() as a:
        await a.post("/v1/calls", json=opening(), headers=auth)
        await a.post("/v1/calls/call_1/entries", json=batch(0, 2), headers=auth)
    async with replica() as b:  # a restarted replica: nothing in memory
        assert b.app.state.call_log.cached == 0
        r = await b.post("/v1/calls/call_1/entries", json=batch(2, 2), headers=auth)
        assert r.json()["seqs"] == [4, 5]
        assert b.app.state.call_log.cached == 1
        replay = await b.post("/v1/calls/call_1/entries", json=batch(0, 2), headers=auth)
        assert (replay.json()["seqs"], replay.json()["replayed"]) == ([2, 3], True)
