"""A service key (the dispatcher's, the reaper's): what they do to any call of any environment,
and nothing an operator alone does or reads."""

from __future__ import annotations

import datetime as dt

import pytest

from pinecall_contracts.calls import CallLogPage, CallLogRequest
from pinecall_servicekit.bus import Bus
from pinecall_servicekit.errors import Forbidden
from pinecall_testkit.call_log import Keys, Replica, bearer, opening


async def test_a_service_key_lists_reads_ends_and_seals_calls_of_every_environment(
    call_log: Replica, keys: Keys
) -> None:
    """The reaper's sweep and the death handler's reads and ends, with the service key."""
    service = bearer(keys.service)
    sandbox = opening("call_s", environment="sandbox")
    assert (await call_log.post("/v1/calls", json=sandbox, headers=bearer(keys.sandbox))).is_success
    page = await call_log.get(
        "/v1/calls", params={"environment": "sandbox", "state": ["open", "ended"]}, headers=service
    )
    assert page.status_code == 200, page.text
    assert [c["call"] for c in page.json()["calls"]] == ["call_s"]
    record = await call_log.get("/v1/calls/call_s", headers=service)
    assert (record.status_code, record.json()["environment"]) == (200, "sandbox")
    ended = await call_log.post(
        "/v1/calls/call_s/end", json={"outcome": "drained"}, headers=service
    )
    assert (ended.status_code, ended.json()["state"]) == (200, "ended")
    sealed = await call_log.post("/v1/calls/call_s/seal", headers=service)
    assert (sealed.status_code, sealed.json()["state"]) == (200, "sealed")


async def test_a_service_key_writes_on_an_agents_log_and_asks_call_backs_naming_the_environment(
    call_log: Replica, keys: Keys
) -> None:
    """The dispatcher's ``fleet.full`` at admission and a dead worker's caller called back."""
    service = bearer(keys.service)
    full = {"kind": "fleet.full", "data": {"fleet": "pinecall-sandbox"}}
    unnamed = await call_log.post("/v1/agents/support-bot/log", json=full, headers=service)
    assert unnamed.status_code == 422
    assert unnamed.json()["detail"].startswith("a service key names the environment of")
    named = await call_log.post(
        "/v1/agents/support-bot/log",
        json=full,
        params={"environment": "sandbox"},
        headers=service,
    )
    assert named.status_code == 200, named.text
    back = {"agent": "support-bot", "number": "+15550100", "call": "call_9"}
    asked = await call_log.post(
        "/v1/callbacks", json=back, params={"environment": "sandbox"}, headers=service
    )
    assert asked.status_code == 200, asked.text
    log = await call_log.get("/v1/agents/support-bot/log", headers=bearer(keys.app_sandbox))
    assert [e["kind"] for e in log.json()["entries"]] == ["fleet.full", "callback.requested"]


async def test_a_service_key_is_refused_what_only_an_operator_reads_or_does(
    call_log: Replica, keys: Keys
) -> None:
    """No transcript (the ops verb ``calls.log``; of the entries, only how the phone leg was
    dialled and how the call ended), no log token: 403."""
    opened = await call_log.post("/v1/calls", json=opening(), headers=bearer(keys.production))
    assert opened.is_success
    now = dt.datetime.now(dt.UTC).isoformat()
    said = [
        {"kind": "call.dialled", "ts": now, "data": {"answered": True, "sip_status_code": None}},
        {"kind": "turn.agent", "ts": now, "data": {"text": "Hello, this is Acme."}},
    ]
    written = await call_log.post(
        "/v1/calls/call_1/entries",
        json={"after": 0, "entries": said},
        headers=bearer(keys.production),
    )
    assert written.status_code == 200, written.text
    service = bearer(keys.service)
    read = await call_log.get("/v1/calls/call_1/entries", headers=service)
    assert read.status_code == 200, read.text
    assert [e["kind"] for e in read.json()["entries"]] == ["call.dialled"]
    for method, path in (
        ("GET", "/v1/agents/support-bot/log?environment=production"),
        ("POST", "/v1/calls/call_1/log-token"),
    ):
        r = await call_log.request(method, path, headers=service)
        assert r.status_code == 403, (path, r.text)
        assert r.headers["content-type"].startswith("application/problem+json")
    bus: Bus = call_log.app.state.call_log.bus
    with pytest.raises(Forbidden, match="a service key cannot do this"):
        await bus.request(
            bus.subjects.ops_calls_log, CallLogRequest(call="call_1"), CallLogPage, headers=service
        )
