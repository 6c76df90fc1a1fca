"""``POST /v1/entries``: a worker's calls' batches in one request, each answered as it would be
alone (issue 20): written, replayed, or refused with its own problem detail, and what one refused
never stops another."""

from __future__ import annotations

import asyncio
from typing import Any

from pinecall_testkit.call_log import TS, Keys, Replica, batch, bearer, later, opening

WORKER = "/v1/entries"


async def opened(
    call_log: Replica, keys: Keys, *calls: str, environment: str = "production"
) -> None:
    key = keys.production if environment == "production" else keys.sandbox
    for call in calls:
        r = await call_log.post(
            "/v1/calls", json=opening(call, environment=environment), headers=bearer(key)
        )
        assert r.status_code == 200, r.text


async def log_of(call_log: Replica, keys: Keys, call: str) -> list[dict[str, Any]]:
    r = await call_log.get(f"/v1/calls/{call}/entries", headers=bearer(keys.operator))
    assert r.status_code == 200, r.text
    return list(r.json()["entries"])


def part(call: str, after: int, size: int) -> dict[str, Any]:
    return {"call": call, **batch(after, size)}


async def test_each_calls_batch_takes_its_seqs_and_the_same_request_again_is_a_replay(
    call_log: Replica, keys: Keys
) -> None:
    await opened(call_log, keys, "call_a", "call_b", "call_c")
    body = {"batches": [part("call_b", 0, 2), part("call_a", 0, 3), part("call_c", 0, 1)]}
    first = await call_log.post(WORKER, json=body, headers=bearer(keys.production))
    assert first.status_code == 200, first.text
    answers = first.json()["answers"]
    assert [a["call"] for a in answers] == ["call_b", "call_a", "call_c"]  # the request's order
    assert [(a["written"]["seqs"], a["written"]["written"]) for a in answers] == [
        ([2, 3], 2),
        ([2, 3, 4], 3),
        ([2], 1),
    ]
    assert all("problem" not in a and not a["written"]["replayed"] for a in answers)
    again = await call_log.post(WORKER, json=body, headers=bearer(keys.production))
    assert [(a["written"]["seqs"], a["written"]["replayed"]) for a in again.json()["answers"]] == [
        ([2, 3], True),
        ([2, 3, 4], True),
        ([2], True),
    ]
    for call, size in (("call_a", 3), ("call_b", 2), ("call_c", 1)):
        entries = await log_of(call_log, keys, call)
        assert [e["counted"] for e in entries[1:]] == list(range(size))
        assert [e["data"]["n"] for e in entries[1:]] == list(range(size))


async def test_a_batch_sent_again_beside_its_first_is_answered_as_a_replay(
    call_log: Replica, keys: Keys
) -> None:
    await opened(call_log, keys, "call_a")
    body = {"batches": [part("call_a", 0, 2), part("call_a", 0, 2), part("call_a", 2, 1)]}
    r = await call_log.post(WORKER, json=body, headers=bearer(keys.production))
    assert [(a["written"]["seqs"], a["written"]["replayed"]) for a in r.json()["answers"]] == [
        ([2, 3], False),
        ([2, 3], True),
        ([4], False),
    ]
    assert [e["counted"] for e in (await log_of(call_log, keys, "call_a"))[1:]] == [0, 1, 2]


async def test_each_refusal_is_its_batchs_own_and_the_others_are_written(
    call_log: Replica, keys: Keys
) -> None:
    await opened(call_log, keys, "call_ok", "call_gap", "call_sealed", "call_ok2")
    await opened(call_log, keys, "call_sandbox", environment="sandbox")
    sealed = await call_log.post(
        "/v1/calls/call_sealed/seal", json={"outcome": "completed"}, headers=bearer(keys.production)
    )
    assert sealed.status_code == 200
    too_large = {
        "call": "call_ok2",
        "after": 0,
        "entries": [{"kind": "turn.user", "ts": TS, "data": {"text": "x" * 70_000}}],
    }
    body = {
        "batches": [
            part("call_ok", 0, 2),
            part("call_gap", 3, 1),
            part("call_unknown", 0, 1),
            part("call_sandbox", 0, 1),
            part("call_sealed", 0, 1),
            too_large,
            part("call_ok", 2, 1),
        ]
    }
    r = await call_log.post(WORKER, json=body, headers=bearer(keys.production))
    assert r.status_code == 200, r.text
    answers = r.json()["answers"]
    said = [(a["call"], a["problem"]["status"] if "problem" in a else 200) for a in answers]
    assert said == [
        ("call_ok", 200),
        ("call_gap", 409),
        ("call_unknown", 404),
        ("call_sandbox", 403),
        ("call_sealed", 409),
        ("call_ok2", 422),
        ("call_ok", 200),
    ]
    gap = answers[1]["problem"]
    assert gap["errors"] == [{"path": "$.after", "written": 0, "after": 3}]
    assert gap["instance"] == "/v1/calls/call_gap/entries"
    assert answers[5]["problem"]["code"] == "unprocessable"
    assert "65536" in answers[5]["problem"]["detail"]
    assert [e["counted"] for e in (await log_of(call_log, keys, "call_ok"))[1:]] == [0, 1, 2]
    for call in ("call_gap", "call_ok2", "call_sandbox"):
        assert [e["kind"] for e in await log_of(call_log, keys, call)] == ["call.started"], call


async def test_a_body_postgres_cannot_store_is_refused_whole_and_writes_nothing(
    call_log: Replica, keys: Keys
) -> None:
    """A NUL character is refused as the body's (422 naming its place), as on the one call's
    route: the relay then sends each batch alone, so only that call's is refused."""
    await opened(call_log, keys, "call_ok", "call_nul")
    nul = {
        "call": "call_nul",
        "after": 0,
        "entries": [{"kind": "turn.user", "ts": TS, "data": {"text": "a\u0000b"}}],
    }
    body = {"batches": [part("call_ok", 0, 1), nul]}
    r = await call_log.post(WORKER, json=body, headers=bearer(keys.production))
    assert r.status_code == 422
    assert "$.batches[1].entries[0].data.text" in r.json()["detail"]
    for call in ("call_ok", "call_nul"):
        assert [e["kind"] for e in await log_of(call_log, keys, call)] == ["call.started"]


async def test_entries_are_kept_as_on_their_own_route_times_clamped_and_data_whole(
    call_log: Replica, keys: Keys
) -> None:
    """The one statement keeps what the one call's route keeps: the writer's ``ts`` in UTC,
    clamped to the service's clock and to 2000, the data as sent; and the same batch sent
    again on the call's own route is its replay (the digests are the same)."""
    await opened(call_log, keys, "call_a", "call_b")
    future = later(3600)
    data = {"text": "¿Cuándo? 東京 \U0001f600", "nested": {"list": [1, 2.5, None, True]}}
    entries = [
        {"kind": "transcript.user", "ts": "2026-11-30T07:49:19.123456+01:00", "data": data},
        {"kind": "transcript.user", "ts": future, "data": {"n": 1}},
        {"kind": "transcript.user", "ts": "0001-01-01T00:00:00+14:00", "data": {}},
    ]
    body = {"batches": [part("call_a", 0, 1), {"call": "call_b", "after": 0, "entries": entries}]}
    r = await call_log.post(WORKER, json=body, headers=bearer(keys.production))
    assert [a["written"]["seqs"] for a in r.json()["answers"]] == [[2], [2, 3, 4]]
    _, kept, clamped, early = await log_of(call_log, keys, "call_b")
    assert kept["ts"].startswith("2026-11-30T06:49:19.123456")
    assert kept["data"] == data
    assert clamped["ts"] < future.replace("+00:00", "Z")
    assert early["ts"].startswith("2000-01-01T00:00:00")
    assert early["data"] == {}
    again = await call_log.post(
        "/v1/calls/call_b/entries",
        json={"after": 0, "entries": entries},
        headers=bearer(keys.production),
    )
    assert (again.json()["seqs"], again.json()["replayed"]) == ([2, 3, 4], True)


async def test_two_requests_naming_the_same_calls_in_two_orders_never_deadlock(
    call_log: Replica, keys: Keys
) -> None:
    """The heads are locked in the order of their ids before the one statement writes: without
    it, the update locked them in each request's order, and two such requests deadlocked (a
    1 s stall, then every batch 503)."""
    calls = [f"call_{i:02d}" for i in range(64)]
    await opened(call_log, keys, *calls)
    auth = bearer(keys.production)
    for after in range(0, 16, 2):
        forward = {"batches": [part(c, after, 2) for c in calls]}
        backward = {"batches": [part(c, after, 2) for c in reversed(calls)]}
        answers = await asyncio.gather(
            call_log.post(WORKER, json=forward, headers=auth),
            call_log.post(WORKER, json=backward, headers=auth),
        )
        for r in answers:
            assert r.status_code == 200, r.text
            said = r.json()["answers"]
            assert all("written" in a for a in said), [
                a["problem"] for a in said if "problem" in a
            ][:3]
        # each batch written by one request, answered to the other as its replay
        replayed = [a["written"]["replayed"] for r in answers for a in r.json()["answers"]]
        assert replayed.count(False) == len(calls)
    for call in (calls[0], calls[-1]):
        assert [e["counted"] for e in (await log_of(call_log, keys, call))[1:]] == list(range(16))
