"""The log through one replica: open, batches, replays, 409s, /events, reopened, end and seal."""

from __future__ import annotations

import datetime as dt

import pytest

from pinecall_testkit.call_log import Keys, Replica, batch, bearer, entry, later, opening


async def opened(call_log: Replica, keys: Keys, call: str = "call_1") -> dict:
    r = await call_log.post("/v1/calls", json=opening(call), headers=bearer(keys.production))
    assert r.status_code == 200, r.text
    return r.json()


async def log_of(call_log: Replica, keys: Keys, call: str = "call_1") -> list[dict]:
    r = await call_log.get(f"/v1/calls/{call}/entries", headers=bearer(keys.operator))
    assert r.status_code == 200, r.text
    return r.json()["entries"]


async def test_opening_writes_call_started_naming_the_worker_and_is_idempotent(
    call_log: Replica, keys: Keys
) -> None:
    record = await opened(call_log, keys)
    assert (record["state"], record["written"], record["last_seq"]) == ("open", 0, 1)
    again = await opened(call_log, keys)
    assert again["opened_at"] == record["opened_at"]
    (started,) = await log_of(call_log, keys)
    assert started["kind"] == "call.started"
    assert started["data"]["worker"] == "pinecall/worker-a.1791067258"
    assert started["counted"] is None
    other = await call_log.post(
        "/v1/calls",
        json=opening(worker="pinecall/worker-b.1791067258"),
        headers=bearer(keys.production),
    )
    assert other.status_code == 409


async def test_batches_take_the_next_seqs_and_a_replay_writes_nothing(
    call_log: Replica, keys: Keys
) -> None:
    await opened(call_log, keys)
    path, auth = "/v1/calls/call_1/entries", bearer(keys.production)
    first = await call_log.post(path, json=batch(0, 3), headers=auth)
    assert first.json() == {
        "type": "calls.batch_written.v1",
        "seqs": [2, 3, 4],
        "written": 3,
        "replayed": False,
    }
    second = await call_log.post(path, json=batch(3, 2), headers=auth)
    assert second.json()["seqs"] == [5, 6]
    again = await call_log.post(path, json=batch(0, 3), headers=auth)  # its answer was lost
    assert again.status_code == 200
    assert (again.json()["seqs"], again.json()["replayed"]) == ([2, 3, 4], True)
    entries = await log_of(call_log, keys)
    assert [e["seq"] for e in entries] == [1, 2, 3, 4, 5, 6]
    assert [e["data"].get("n") for e in entries[1:]] == [0, 1, 2, 3, 4]
    assert [e["counted"] for e in entries[1:]] == [0, 1, 2, 3, 4]


@pytest.mark.parametrize(
    ("body", "written", "after"),
    [
        (batch(7, 2), 5, 7),  # a gap
        (batch(4, 3), 5, 4),  # an overlap
        ({"after": 3, "entries": []}, 5, 3),  # an empty batch behind the count
        ({"after": 0, "entries": [entry(9), entry(1)]}, 5, 0),  # another batch at taken places
    ],
    ids=["gap", "overlap", "empty-behind", "different-batch"],
)
async def test_anything_else_is_a_409_that_says_both_counts(
    call_log: Replica, keys: Keys, body: dict, written: int, after: int
) -> None:
    await opened(call_log, keys)
    auth = bearer(keys.production)
    await call_log.post("/v1/calls/call_1/entries", json=batch(0, 5), headers=auth)
    r = await call_log.post("/v1/calls/call_1/entries", json=body, headers=auth)
    assert r.status_code == 409
    problem = r.json()
    assert problem["errors"] == [{"path": "$.after", "written": written, "after": after}]
    assert len(await log_of(call_log, keys)) == 6


async def test_an_empty_batch_at_the_count_answers_no_seqs(call_log: Replica, keys: Keys) -> None:
    await opened(call_log, keys)
    r = await call_log.post(
        "/v1/calls/call_1/entries",
        json={"after": 0, "entries": []},
        headers=bearer(keys.production),
    )
    assert r.json()["seqs"] == []
    assert len(await log_of(call_log, keys)) == 1


async def test_an_entry_keeps_the_writer_ts_clamped_to_the_service_clock(
    call_log: Replica, keys: Keys
) -> None:
    await opened(call_log, keys)
    future = later(3600)
    body = {"after": 0, "entries": [entry(0), entry(1, ts=future)]}
    await call_log.post("/v1/calls/call_1/entries", json=body, headers=bearer(keys.production))
    _, past, clamped = await log_of(call_log, keys)
    assert past["ts"].startswith("2026-11-30T06:49:19")
    assert clamped["ts"] < future.replace("+00:00", "Z")


async def test_an_entry_from_a_clock_at_year_one_is_written_at_2000_not_a_500(
    call_log: Replica, keys: Keys
) -> None:
    await opened(call_log, keys)
    body = {"after": 0, "entries": [entry(0, ts="0001-01-01T00:00:00+14:00")]}
    r = await call_log.post("/v1/calls/call_1/entries", json=body, headers=bearer(keys.production))
    assert r.status_code == 200, r.text
    written = (await log_of(call_log, keys))[-1]
    assert written["ts"].startswith("2000-01-01T00:00:00")


async def test_events_of_older_workers_take_a_seq_and_count_nothing(
    call_log: Replica, keys: Keys
) -> None:
    await opened(call_log, keys)
    auth = bearer(keys.production)
    r = await call_log.post("/v1/calls/call_1/events", json=entry(0), headers=auth)
    assert r.json() == {"type": "calls.event_written.v1", "seq": 2}
    # the writer's count is untouched: its batch still starts at 0
    b = await call_log.post("/v1/calls/call_1/entries", json=batch(0, 1), headers=auth)
    assert b.json()["seqs"] == [3]


async def test_end_and_seal_are_idempotent_and_a_sealed_call_is_409_everywhere(
    call_log: Replica, keys: Keys
) -> None:
    await opened(call_log, keys)
    auth = bearer(keys.production)
    ended = await call_log.post("/v1/calls/call_1/end", json={"outcome": "completed"}, headers=auth)
    assert (ended.json()["state"], ended.json()["outcome"]) == ("ended", "completed")
    again = await call_log.post("/v1/calls/call_1/end", json={"outcome": "failed"}, headers=auth)
    assert again.json()["outcome"] == "completed"
    # an ended call still takes its writer's last entries until it is sealed
    late = await call_log.post("/v1/calls/call_1/entries", json=batch(0, 1), headers=auth)
    assert late.status_code == 200
    sealed = await call_log.post("/v1/calls/call_1/seal", headers=auth)
    assert sealed.json()["state"] == "sealed"
    assert (await call_log.post("/v1/calls/call_1/seal", headers=auth)).status_code == 200
    before = await log_of(call_log, keys)
    assert [e["kind"] for e in before] == [
        "call.started",
        "call.ended",
        "transcript.user",
        "call.sealed",
    ]
    refusals = {
        "entries": await call_log.post("/v1/calls/call_1/entries", json=batch(1, 1), headers=auth),
        "replay": await call_log.post("/v1/calls/call_1/entries", json=batch(0, 1), headers=auth),
        "events": await call_log.post("/v1/calls/call_1/events", json=entry(5), headers=auth),
        "end": await call_log.post(
            "/v1/calls/call_1/end", json={"outcome": "failed"}, headers=auth
        ),
        "open": await call_log.post("/v1/calls", json=opening(), headers=auth),
        "reopened": await call_log.post(
            "/v1/calls/call_1/reopened", json={"agent": "support-bot"}, headers=auth
        ),
        "tools": await call_log.post(
            "/v1/calls/call_1/tools", json={"id": "t1", "name": "book"}, headers=auth
        ),
        "tool result": await call_log.post(
            "/v1/calls/call_1/tools/t1/result", json={"result": 1}, headers=bearer(keys.app)
        ),
    }
    assert {name: r.status_code for name, r in refusals.items()} == dict.fromkeys(refusals, 409)
    assert all(
        r.headers["content-type"].startswith("application/problem+json") for r in refusals.values()
    )
    assert await log_of(call_log, keys) == before


async def test_seal_of_an_open_call_ends_it_with_the_outcome_named(
    call_log: Replica, keys: Keys
) -> None:
    await opened(call_log, keys)
    auth = bearer(keys.production)
    assert (await call_log.post("/v1/calls/call_1/seal", headers=auth)).status_code == 422
    r = await call_log.post("/v1/calls/call_1/seal", json={"outcome": "drained"}, headers=auth)
    assert (r.json()["state"], r.json()["outcome"], r.json()["cause"]) == (
        "sealed",
        "drained",
        None,
    )


async def test_a_drained_calls_cause_is_kept_with_its_outcome_and_a_repeat_changes_neither(
    call_log: Replica, keys: Keys
) -> None:
    await opened(call_log, keys)
    auth = bearer(keys.production)
    first = {"outcome": "drained", "reason": "agent lost", "cause": "lost_agent"}
    r = await call_log.post("/v1/calls/call_1/end", json=first, headers=auth)
    assert (r.json()["outcome"], r.json()["cause"]) == ("drained", "lost_agent")
    again = {"outcome": "drained", "cause": "stale"}
    r = await call_log.post("/v1/calls/call_1/seal", json=again, headers=auth)
    assert (r.json()["state"], r.json()["cause"]) == ("sealed", "lost_agent")
    [ended] = [e for e in await log_of(call_log, keys) if e["kind"] == "call.ended"]
    assert ended["data"] == {"outcome": "drained", "reason": "agent lost", "cause": "lost_agent"}


async def test_an_end_is_stamped_when_the_call_ended_kept_between_its_opening_and_arrival(
    call_log: Replica, keys: Keys
) -> None:
    """``CallEnd.at`` (the worker's time of its session's close) stamps ``call.ended`` and
    ``ended_at``, not the end's arrival after the last upload; an ``at`` past the arrival is the
    arrival's, one before the opening the opening's; a repeat's changes nothing; the seal is
    stamped when it comes."""
    auth = bearer(keys.production)
    stamps: dict[str, tuple[str, str]] = {}
    for call, offset in (("call_1", None), ("call_2", -3600.0), ("call_3", 3600.0)):
        record = await opened(call_log, keys, call)
        now = dt.datetime.now(dt.UTC)  # after the opening, before the end arrives
        at = now if offset is None else now + dt.timedelta(seconds=offset)
        body = {"outcome": "completed", "at": at.isoformat()}
        before = dt.datetime.now(dt.UTC)
        r = await call_log.post(f"/v1/calls/{call}/end", json=body, headers=auth)
        after = dt.datetime.now(dt.UTC)
        assert r.status_code == 200, r.text
        ended_at = dt.datetime.fromisoformat(r.json()["ended_at"])
        [ended] = [e for e in await log_of(call_log, keys, call) if e["kind"] == "call.ended"]
        assert dt.datetime.fromisoformat(ended["ts"]) == ended_at
        if offset is None:
            assert ended_at == at
        elif offset < 0:
            assert ended_at == dt.datetime.fromisoformat(record["opened_at"])
        else:
            assert before <= ended_at <= after
        stamps[call] = (r.json()["ended_at"], ended["ts"])
    later_at = {"outcome": "drained", "at": dt.datetime.now(dt.UTC).isoformat()}
    r = await call_log.post("/v1/calls/call_1/seal", json=later_at, headers=auth)
    assert (r.json()["state"], r.json()["ended_at"]) == ("sealed", stamps["call_1"][0])
    [sealed] = [e for e in await log_of(call_log, keys) if e["kind"] == "call.sealed"]
    assert dt.datetime.fromisoformat(sealed["ts"]) > dt.datetime.fromisoformat(stamps["call_1"][1])


async def test_a_call_an_older_release_opened_is_404_until_reopened_once(
    call_log: Replica, keys: Keys
) -> None:
    auth = bearer(keys.production)
    r = await call_log.post("/v1/calls/old_1/entries", json=batch(0, 1), headers=auth)
    assert r.status_code == 404
    body = {"agent": "support-bot", "context": {"caller": "+15550100"}, "written": 4}
    record = (await call_log.post("/v1/calls/old_1/reopened", json=body, headers=auth)).json()
    assert (record["reopened"], record["written"], record["environment"]) == (
        True,
        4,
        "production",
    )
    again = await call_log.post("/v1/calls/old_1/reopened", json=body, headers=auth)
    assert again.json()["last_seq"] == record["last_seq"]
    b = await call_log.post("/v1/calls/old_1/entries", json=batch(4, 2), headers=auth)
    assert b.json()["seqs"] == [2, 3]
    kinds = [e["kind"] for e in await log_of(call_log, keys, "old_1")]
    assert kinds == ["call.reopened", "transcript.user", "transcript.user"]
    assert "call.ringing" not in kinds
    assert "call.started" not in kinds


async def test_call_events_are_said_on_nats(call_log: Replica, keys: Keys) -> None:
    import asyncio

    from pinecall_contracts.calls import CallEvent

    bus = call_log.app.state.call_log.bus
    heard: asyncio.Queue[CallEvent] = asyncio.Queue()
    for what in ("opened", "ended", "sealed"):
        await bus.subscribe(bus.subjects.call_events(what), CallEvent, heard.put)
    await bus.client.flush()
    await opened(call_log, keys)
    auth = bearer(keys.production)
    ending = {"outcome": "drained", "cause": "shutdown"}
    await call_log.post("/v1/calls/call_1/seal", json=ending, headers=auth)
    events = [await asyncio.wait_for(heard.get(), 5) for _ in range(3)]
    assert [(e.what, e.call) for e in events] == [
        ("opened", "call_1"),
        ("ended", "call_1"),
        ("sealed", "call_1"),
    ]
    assert (events[1].outcome, events[1].cause) == ("drained", "shutdown")


async def test_the_openapi_says_each_refusal_as_a_problem_detail(call_log: Replica) -> None:
    """What a writer meets besides 200 is documented, as problem+json (the contract's shape)."""
    schema = (await call_log.get("/schema/openapi.json")).json()
    batch_answers = schema["paths"]["/v1/calls/{call}/entries"]["post"]["responses"]
    assert {"400", "401", "403", "404", "409", "422", "503"} <= set(batch_answers)
    assert set(batch_answers["409"]["content"]) == {"application/problem+json"}
    for path, verbs in schema["paths"].items():
        for verb, operation in verbs.items():
            if path.startswith("/v1/"):
                assert "401" in operation["responses"] or path.endswith("/stream"), (path, verb)
