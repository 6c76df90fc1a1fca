"""The page's stream resumed after a cursor: ``Last-Event-ID`` (an ``EventSource``
reconnecting) or ``?last_event_id=`` (a page rebuilding its ``EventSource`` after a non-200,
which cannot set the header), the header winning; a sealed call with nothing after the cursor is
204; any origin may read it (issue 17, "The page"; shared/reference/app-socket.md §3)."""

from __future__ import annotations

import pytest

from pinecall_call_log.stream import RETRY_MS
from pinecall_testkit.call_log import Keys, Replica, batch, bearer, opening

CALL = "/v1/calls/call_1"


@pytest.fixture
async def token(call_log: Replica, keys: Keys) -> str:
    """A log token of call_1, whose log is sealed at seq 6 (opened, 3 entries, ended, sealed)."""
    auth = bearer(keys.production)
    assert (await call_log.post("/v1/calls", json=opening(), headers=auth)).status_code == 200
    await call_log.post(f"{CALL}/entries", json=batch(0, 3), headers=auth)
    await call_log.post(f"{CALL}/seal", json={"outcome": "completed"}, headers=auth)
    minted = await call_log.post(f"{CALL}/log-token", headers=bearer(keys.app))
    return str(minted.json()["token"])


def ids(body: str) -> list[int]:
    return [int(line[3:]) for line in body.splitlines() if line.startswith("id:")]


async def test_the_query_cursor_resumes_after_it(call_log: Replica, token: str) -> None:
    r = await call_log.get(f"{CALL}/stream", params={"log_token": token, "last_event_id": "2"})
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/event-stream")
    assert r.headers["access-control-allow-origin"] == "*"
    assert ids(r.text) == [3, 4, 5, 6]
    assert r.text.startswith(f"retry: {RETRY_MS}\r\n")


async def test_the_header_wins_over_the_query(call_log: Replica, token: str) -> None:
    r = await call_log.get(
        f"{CALL}/stream",
        params={"log_token": token, "last_event_id": "1"},
        headers={"Last-Event-ID": "4"},
    )
    assert ids(r.text) == [5, 6]


async def test_no_cursor_is_the_whole_log(call_log: Replica, token: str) -> None:
    r = await call_log.get(f"{CALL}/stream", params={"log_token": token})
    assert ids(r.text) == [1, 2, 3, 4, 5, 6]


@pytest.mark.parametrize("where", ["query", "header"])
async def test_a_sealed_call_read_to_its_end_is_204(
    call_log: Replica, token: str, where: str
) -> None:
    params = {"log_token": token} | ({"last_event_id": "6"} if where == "query" else {})
    headers = {"Last-Event-ID": "6"} if where == "header" else {}
    r = await call_log.get(f"{CALL}/stream", params=params, headers=headers)
    assert (r.status_code, r.content) == (204, b"")


@pytest.mark.parametrize("cursor", ["x", "-1", "1.5", "²", "9" * 19])
async def test_a_query_cursor_not_a_seq_is_422(
    call_log: Replica, keys: Keys, token: str, cursor: str
) -> None:
    before = (await call_log.get(f"{CALL}/entries", headers=bearer(keys.operator))).json()
    r = await call_log.get(f"{CALL}/stream", params={"log_token": token, "last_event_id": cursor})
    assert r.status_code == 422
    assert r.headers["content-type"].startswith("application/problem+json")
    assert "last_event_id" in r.json()["detail"]
    after = (await call_log.get(f"{CALL}/entries", headers=bearer(keys.operator))).json()
    assert after == before
