"""``GET /v1/calls``: the calls not sealed yet, per environment and state, paged, each with the
time its log last moved (what the reaper reads every minute, issue 8)."""

from __future__ import annotations

import datetime as dt

from pinecall_testkit.call_log import Keys, Replica, bearer, entry, opening


async def listed(call_log: Replica, key: str, **params: object) -> dict[str, object]:
    r = await call_log.get("/v1/calls", params=params, headers=bearer(key))
    assert r.status_code == 200, r.text
    body: dict[str, object] = r.json()
    return body


def ids(page: dict[str, object]) -> list[str]:
    return [c["call"] for c in page["calls"]]  # type: ignore[attr-defined, index]


async def test_unsealed_calls_by_state_and_environment_with_their_last_entry(
    call_log: Replica, keys: Keys
) -> None:
    prod, sandbox = bearer(keys.production), bearer(keys.sandbox)
    for call in ("call_a", "call_b", "call_c"):
        assert (await call_log.post("/v1/calls", json=opening(call), headers=prod)).is_success
    other = opening("call_s", environment="sandbox")
    assert (await call_log.post("/v1/calls", json=other, headers=sandbox)).is_success
    ts = "2026-11-30T06:49:19+00:00"
    body = {"after": 0, "entries": [entry(0, ts=ts)]}
    assert (await call_log.post("/v1/calls/call_a/entries", json=body, headers=prod)).is_success
    ended = {"outcome": "drained", "cause": "stale"}
    assert (await call_log.post("/v1/calls/call_b/end", json=ended, headers=prod)).is_success
    assert (await call_log.post("/v1/calls/call_c/seal", json=ended, headers=prod)).is_success

    page = await listed(call_log, keys.production)
    assert (page["environment"], ids(page), page["next"]) == ("production", ["call_a"], None)
    [a] = page["calls"]  # type: ignore[misc]
    assert (a["state"], a["written"], a["room"], a["worker"]) == (
        "open",
        1,
        "room-call_a",
        "pinecall/worker-a.1791067258",
    )
    # the newest entry is the writer's, whose ts (in the past) is kept as it happened
    assert dt.datetime.fromisoformat(a["last_entry_at"]) == dt.datetime.fromisoformat(ts)

    page = await listed(call_log, keys.production, state=["open", "ended"])
    assert ids(page) == ["call_a", "call_b"]
    [_, b] = page["calls"]  # type: ignore[misc]
    assert (b["state"], b["outcome"], b["cause"]) == ("ended", "drained", "stale")
    # call.ended is the newest entry of call_b: the service's clock, not before it ended
    assert b["last_entry_at"] == b["ended_at"]
    assert ids(await listed(call_log, keys.production, state="ended")) == ["call_b"]

    assert ids(await listed(call_log, keys.sandbox)) == ["call_s"]
    assert ids(await listed(call_log, keys.operator, environment="sandbox")) == ["call_s"]
    assert ids(await listed(call_log, keys.operator)) == ["call_a"]  # production by default


async def test_pages_follow_on_from_next_until_none(call_log: Replica, keys: Keys) -> None:
    prod = bearer(keys.production)
    calls = [f"call_{n:02d}" for n in range(7)]
    for call in calls:
        assert (await call_log.post("/v1/calls", json=opening(call), headers=prod)).is_success
    seen: list[str] = []
    after = ""
    pages = 0
    while True:
        page = await listed(call_log, keys.operator, limit=3, after=after)
        seen += ids(page)
        pages += 1
        if page["next"] is None:
            break
        after = str(page["next"])
    assert (seen, pages) == (calls, 3)
