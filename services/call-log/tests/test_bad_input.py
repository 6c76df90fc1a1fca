"""Every endpoint refuses bad input with a problem detail, and nothing is written (issue 5,
acceptance 6): malformed JSON, wrong types, an oversize batch, an unknown call, no key or the
wrong one."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pinecall_testkit.call_log import TS, Keys, Replica, batch, bearer, entry, opening

PROBLEM = "application/problem+json"
MALFORMED = b'{"after": 0, "entries": ['
OPEN, CALL = "/v1/calls", "/v1/calls/call_1"


async def snapshot(call_log: Replica, keys: Keys) -> tuple[Any, ...]:
    auth = bearer(keys.operator)
    log = (await call_log.get(f"{CALL}/entries", headers=auth)).json()
    record = (await call_log.get(CALL, headers=auth)).json()
    other = (await call_log.get("/v1/calls/call_2", headers=auth)).status_code
    production = {"environment": "production"}
    agent = (
        await call_log.get("/v1/agents/support-bot/log", params=production, headers=auth)
    ).json()
    return log["entries"], record, other, agent["entries"]


@pytest.fixture
async def ready(call_log: Replica, keys: Keys) -> tuple[Any, ...]:
    auth = bearer(keys.production)
    assert (await call_log.post(OPEN, json=opening(), headers=auth)).status_code == 200
    assert (
        await call_log.post(f"{CALL}/entries", json=batch(0, 2), headers=auth)
    ).status_code == 200
    return await snapshot(call_log, keys)


TOOL = {"id": "t1", "name": "book", "timeout_s": 5}
CASES: list[tuple[str, str, str, Any, str | None, int]] = [
    # (name, method, path, body: dict | bytes | None, key, status)
    ("open malformed", "POST", OPEN, MALFORMED, "production", 400),
    ("open wrong types", "POST", OPEN, opening("call_2", context="x"), "production", 400),
    ("open bad call id", "POST", OPEN, opening("call 2"), "production", 400),
    ("open no key", "POST", OPEN, opening("call_2"), None, 401),
    ("open other environment", "POST", OPEN, opening("call_2"), "sandbox", 403),
    ("open app key", "POST", OPEN, opening("call_2"), "app", 403),
    ("entries malformed", "POST", f"{CALL}/entries", MALFORMED, "production", 400),
    (
        "entries after negative",
        "POST",
        f"{CALL}/entries",
        {"after": -1, "entries": []},
        "production",
        400,
    ),
    (
        "entries after as a numeric string",
        "POST",
        f"{CALL}/entries",
        {"after": "2", "entries": [entry(2)]},
        "production",
        400,
    ),
    (
        "entries after text",
        "POST",
        f"{CALL}/entries",
        {"after": "two", "entries": []},
        "production",
        400,
    ),
    (
        "entries naive ts",
        "POST",
        f"{CALL}/entries",
        {"after": 2, "entries": [entry(2, ts="2026-11-30T06:49:19")]},
        "production",
        400,
    ),
    (
        "entries bad kind",
        "POST",
        f"{CALL}/entries",
        {"after": 2, "entries": [entry(2, kind="Not A Kind")]},
        "production",
        400,
    ),
    ("entries oversize", "POST", f"{CALL}/entries", batch(2, 501), "production", 400),
    # the service's own kinds are never a writer's: a call.sealed on an open call (stop 12's
    # trial wrote one with a fleet key), a tool.result no app gave
    (
        "entries a seal the log never made",
        "POST",
        f"{CALL}/entries",
        {"after": 2, "entries": [entry(2), entry(3, kind="call.sealed")]},
        "production",
        422,
    ),
    (
        "events a tool.result no app gave",
        "POST",
        f"{CALL}/events",
        entry(0, kind="tool.result"),
        "production",
        422,
    ),
    # Postgres stores no NUL character: the caller's error, never a retryable 500
    (
        "entries a NUL in the data",
        "POST",
        f"{CALL}/entries",
        {"after": 2, "entries": [{"kind": "turn.user", "ts": TS, "data": {"text": "a\u0000b"}}]},
        "production",
        422,
    ),
    (
        "open a NUL in the context",
        "POST",
        OPEN,
        opening("call_2", context={"caller": "+1555\u0000"}),
        "production",
        422,
    ),
    (
        "end a NUL in the reason",
        "POST",
        f"{CALL}/end",
        {"outcome": "completed", "reason": "done\u0000"},
        "production",
        422,
    ),
    ("open nested too deeply", "POST", OPEN, b"[" * 100_000, "production", 400),
    ("entries nested too deeply, no key", "POST", f"{CALL}/entries", b"[" * 100_000, None, 400),
    ("entries unknown call", "POST", "/v1/calls/call_2/entries", batch(0, 1), "production", 404),
    ("entries no key", "POST", f"{CALL}/entries", batch(2, 1), None, 401),
    ("entries garbage key", "POST", f"{CALL}/entries", batch(2, 1), "garbage", 401),
    ("entries other environment", "POST", f"{CALL}/entries", batch(2, 1), "sandbox", 403),
    ("entries operator key", "POST", f"{CALL}/entries", batch(2, 1), "operator", 403),
    ("worker batch malformed", "POST", "/v1/entries", MALFORMED, "production", 400),
    ("worker batch no batches", "POST", "/v1/entries", {"batches": []}, "production", 400),
    (
        "worker batch 65 calls",
        "POST",
        "/v1/entries",
        {"batches": [{"call": f"call_{i}", **batch(0, 1)} for i in range(65)]},
        "production",
        400,
    ),
    (
        "worker batch bad call id",
        "POST",
        "/v1/entries",
        {"batches": [{"call": "call 1", **batch(2, 1)}]},
        "production",
        400,
    ),
    (
        "worker batch no after",
        "POST",
        "/v1/entries",
        {"batches": [{"call": "call_1", "entries": [entry(2)]}]},
        "production",
        400,
    ),
    (
        "worker batch no key",
        "POST",
        "/v1/entries",
        {"batches": [{"call": "call_1", **batch(2, 1)}]},
        None,
        401,
    ),
    (
        "worker batch operator key",
        "POST",
        "/v1/entries",
        {"batches": [{"call": "call_1", **batch(2, 1)}]},
        "operator",
        403,
    ),
    (
        "worker batch app key",
        "POST",
        "/v1/entries",
        {"batches": [{"call": "call_1", **batch(2, 1)}]},
        "app",
        403,
    ),
    ("list unknown state", "GET", "/v1/calls?state=sealed", None, "production", 400),
    ("list limit zero", "GET", "/v1/calls?limit=0", None, "production", 400),
    ("list limit huge", "GET", "/v1/calls?limit=1001", None, "production", 400),
    ("list limit text", "GET", "/v1/calls?limit=many", None, "production", 400),
    ("list bad after", "GET", "/v1/calls?after=call%202", None, "production", 400),
    ("list no key", "GET", "/v1/calls", None, None, 401),
    ("list app key", "GET", "/v1/calls", None, "app", 403),
    ("list other environment", "GET", "/v1/calls?environment=sandbox", None, "production", 403),
    ("read unknown call", "GET", "/v1/calls/call_2/entries", None, "production", 404),
    ("read after negative", "GET", f"{CALL}/entries?after=-1", None, "production", 400),
    ("read other environment", "GET", f"{CALL}/entries", None, "sandbox", 403),
    ("record unknown call", "GET", "/v1/calls/call_2", None, "operator", 404),
    ("events malformed", "POST", f"{CALL}/events", b'{"kind":', "production", 400),
    (
        "events wrong types",
        "POST",
        f"{CALL}/events",
        {"kind": "x", "ts": "yesterday"},
        "production",
        400,
    ),
    ("events unknown call", "POST", "/v1/calls/call_2/events", entry(0), "production", 404),
    ("events no key", "POST", f"{CALL}/events", entry(0), None, 401),
    ("reopened malformed", "POST", "/v1/calls/call_2/reopened", b"{", "production", 400),
    (
        "reopened wrong types",
        "POST",
        "/v1/calls/call_2/reopened",
        {"agent": "support-bot", "written": -1},
        "production",
        400,
    ),
    (
        "reopened operator key",
        "POST",
        "/v1/calls/call_2/reopened",
        {"agent": "support-bot"},
        "operator",
        403,
    ),
    ("reopened no key", "POST", "/v1/calls/call_2/reopened", {"agent": "support-bot"}, None, 401),
    (
        "reopened a call of the other environment",
        "POST",
        f"{CALL}/reopened",
        {"agent": "support-bot"},
        "sandbox",
        403,
    ),
    ("end malformed", "POST", f"{CALL}/end", b"{", "production", 400),
    ("end unknown outcome", "POST", f"{CALL}/end", {"outcome": "exploded"}, "production", 400),
    (
        "end unknown cause",
        "POST",
        f"{CALL}/end",
        {"outcome": "drained", "cause": "gremlins"},
        "production",
        400,
    ),
    (
        "end at a time with no offset",
        "POST",
        f"{CALL}/end",
        {"outcome": "completed", "at": "2026-12-04T18:00:00"},
        "production",
        400,
    ),
    (
        "end at no time",
        "POST",
        f"{CALL}/end",
        {"outcome": "completed", "at": "yesterday"},
        "production",
        400,
    ),
    (
        "end unknown call",
        "POST",
        "/v1/calls/call_2/end",
        {"outcome": "completed"},
        "production",
        404,
    ),
    ("end other environment", "POST", f"{CALL}/end", {"outcome": "completed"}, "sandbox", 403),
    ("seal malformed", "POST", f"{CALL}/seal", b"[", "production", 400),
    ("seal no outcome while open", "POST", f"{CALL}/seal", None, "production", 422),
    (
        "seal unknown call",
        "POST",
        "/v1/calls/call_2/seal",
        {"outcome": "completed"},
        "production",
        404,
    ),
    ("seal no key", "POST", f"{CALL}/seal", {"outcome": "completed"}, None, 401),
    ("tools malformed", "POST", f"{CALL}/tools", b"{", "production", 400),
    ("tools timeout zero", "POST", f"{CALL}/tools", TOOL | {"timeout_s": 0}, "production", 400),
    (
        "tools timeout huge",
        "POST",
        f"{CALL}/tools",
        TOOL | {"timeout_s": 10_000},
        "production",
        400,
    ),
    ("tools unknown call", "POST", "/v1/calls/call_2/tools", TOOL, "production", 404),
    ("tools app key", "POST", f"{CALL}/tools", TOOL, "app", 403),
    ("tool result unknown tool", "POST", f"{CALL}/tools/t9/result", {"result": 1}, "app", 404),
    ("tool result fleet key", "POST", f"{CALL}/tools/t9/result", {"result": 1}, "production", 403),
    (
        "tool result other environment",
        "POST",
        f"{CALL}/tools/t9/result",
        {"result": 1},
        "app_sandbox",
        403,
    ),
    ("tool result malformed", "POST", f"{CALL}/tools/t9/result", b"{", "app", 400),
    (  # an entry's bound holds for the service's own entries too (a probe wrote 200 KB)
        "tool result over an entry's bound",
        "POST",
        f"{CALL}/tools/t9/result",
        {"result": "x" * 70_000},
        "app",
        422,
    ),
    (
        "tools arguments over an entry's bound",
        "POST",
        f"{CALL}/tools",
        TOOL | {"arguments": {"note": "x" * 70_000}},
        "production",
        422,
    ),
    ("callbacks malformed", "POST", "/v1/callbacks", b"{", "app", 400),
    (
        "callbacks bad number",
        "POST",
        "/v1/callbacks",
        {"agent": "support-bot", "number": "call me"},
        "app",
        400,
    ),
    *(
        (
            f"callbacks number {number!r} not E.164",
            "POST",
            "/v1/callbacks",
            {"agent": "support-bot", "number": number},
            "app",
            400,
        )
        # accepted once, then given up by the dialler as not_e164 (a probe): refused up front
        for number in ("12345", "+0123456", "15005550200", "+12")
    ),
    (
        "callbacks nobody to call",
        "POST",
        "/v1/callbacks",
        {"agent": "support-bot", "reason": "x"},
        "app",
        422,
    ),
    (
        "callbacks no key",
        "POST",
        "/v1/callbacks",
        {"agent": "support-bot", "number": "+15550100"},
        None,
        401,
    ),
    (
        "callbacks other environment",
        "POST",
        "/v1/callbacks?environment=sandbox",
        {"agent": "support-bot", "number": "+15550100"},
        "production",
        403,
    ),
    (
        "agent log bad kind",
        "POST",
        "/v1/agents/support-bot/log",
        {"kind": "Fleet Full"},
        "production",
        400,
    ),
    ("agent log malformed", "POST", "/v1/agents/support-bot/log", b"{", "production", 400),
    ("agent log app key", "POST", "/v1/agents/support-bot/log", {"kind": "fleet.full"}, "app", 403),
    (
        "agent log bad agent",
        "POST",
        "/v1/agents/Support%20Bot/log",
        {"kind": "fleet.full"},
        "production",
        400,
    ),
    (
        "agent log other environment",
        "GET",
        "/v1/agents/support-bot/log?environment=sandbox",
        None,
        "production",
        403,
    ),
]


async def test_bad_input_is_a_problem_detail_and_writes_nothing(
    call_log: Replica, keys: Keys, ready: tuple[Any, ...]
) -> None:
    """Every case of :data:`CASES` on one replica and database (one setup, not 56), each
    followed by a check that nothing changed; every case that fails is named."""
    failures = []
    for name, method, path, body, key, status in CASES:
        headers = {"content-type": "application/json"}
        if key == "garbage":
            headers |= bearer("pck_000000000000_" + "x" * 40)
        elif key is not None:
            headers |= bearer(getattr(keys, key))
        content = (
            body if isinstance(body, bytes) else None if body is None else json.dumps(body).encode()
        )
        r = await call_log.request(method, path, content=content, headers=headers)
        problem = r.json() if r.headers["content-type"].startswith(PROBLEM) else {}
        if (r.status_code, problem.get("status"), bool(problem.get("title"))) != (
            status,
            status,
            True,
        ):
            failures.append(f"{name}: {r.status_code} {r.text[:200]}")
        elif await snapshot(call_log, keys) != ready:
            failures.append(f"{name}: something was written")
    assert failures == []


async def test_a_log_token_opens_only_its_own_call_stream(
    call_log: Replica, keys: Keys, ready: tuple[Any, ...]
) -> None:
    minted = await call_log.post(f"{CALL}/log-token", headers=bearer(keys.app))
    token = minted.json()["token"]
    auth = bearer(keys.production)
    await call_log.post(OPEN, json=opening("call_2"), headers=auth)
    other = await call_log.get("/v1/calls/call_2/stream", params={"log_token": token})
    assert other.status_code == 401
    tampered = token[:-2] + ("AA" if not token.endswith("AA") else "BB")
    r = await call_log.get(f"{CALL}/stream", params={"log_token": tampered})
    assert r.status_code == 401
    r = await call_log.get(
        f"{CALL}/stream", params={"log_token": token}, headers={"Last-Event-ID": "x"}
    )
    assert r.status_code == 422
    assert r.headers["content-type"].startswith(PROBLEM)


def big(kind: str, size: int) -> dict[str, Any]:
    """An entry whose data is exactly ``size`` bytes as JSON (``{"text":"xx…"}``)."""
    return {"kind": kind, "ts": TS, "data": {"text": "x" * (size - len('{"text":""}'))}}


@pytest.mark.parametrize(
    ("path", "body"),
    [
        (f"{CALL}/entries", {"after": 2, "entries": [entry(2), big("turn.agent", 9_500_000)]}),
        (f"{CALL}/entries", {"after": 2, "entries": [entry(2), big("turn.agent", 65_537)]}),
        (f"{CALL}/events", big("turn.agent", 65_537)),
        ("/v1/agents/support-bot/log", big("agent.note", 65_537)),
    ],
)
async def test_an_entry_over_its_bound_is_422_naming_it_and_none_of_its_batch_is_written(
    call_log: Replica, keys: Keys, ready: tuple[Any, ...], path: str, body: dict[str, Any]
) -> None:
    """Seen: one entry of 9.5 MB (under the 10 MB body cap) was written whole."""
    r = await call_log.post(path, json=body, headers=bearer(keys.production))
    assert r.status_code == 422, r.text[:300]
    assert "over the 65536 bytes an entry may hold (calls.MAX_ENTRY_BYTES)" in r.json()["detail"]
    assert await snapshot(call_log, keys) == ready


async def test_an_entry_at_its_bound_is_written(
    call_log: Replica, keys: Keys, ready: tuple[Any, ...]
) -> None:
    body = {"after": 2, "entries": [big("turn.agent", 65_536)]}
    r = await call_log.post(f"{CALL}/entries", json=body, headers=bearer(keys.production))
    assert r.status_code == 200, r.text[:300]
