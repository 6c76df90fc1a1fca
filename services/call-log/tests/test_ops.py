"""call-log's ops verb over NATS: a call and its entries in pages, and every bad request named."""

from __future__ import annotations

import datetime as dt

import pytest

from pinecall_call_log.ops import OMITTED, page_of
from pinecall_contracts.base import Contract, encode
from pinecall_contracts.calls import CallLogPage, CallLogRequest, LoggedEntry
from pinecall_contracts.recordings import RecordingsFailedCount, RecordingsFailedRequest
from pinecall_servicekit.bus import Bus
from pinecall_servicekit.errors import Forbidden, NotFound, Unauthorized
from pinecall_testkit.call_log import Keys, Replica, batch, bearer, entry, opening


def bus_of(call_log: Replica) -> Bus:
    bus: Bus = call_log.app.state.call_log.bus
    return bus


async def ask(call_log: Replica, request: Contract, key: str | None) -> CallLogPage:
    bus = bus_of(call_log)
    headers = None if key is None else bearer(key)
    return await bus.request(bus.subjects.ops_calls_log, request, CallLogPage, headers=headers)


async def test_a_call_and_its_entries_come_in_pages(call_log: Replica, keys: Keys) -> None:
    await call_log.post("/v1/calls", json=opening("call_1"), headers=bearer(keys.production))
    await call_log.post(
        "/v1/calls/call_1/entries", json=batch(0, 5), headers=bearer(keys.production)
    )
    first = await ask(call_log, CallLogRequest(call="call_1", limit=4), keys.operator)
    assert (first.record.worker, first.record.state) == ("pinecall/worker-a.1791067258", "open")
    assert [e.seq for e in first.entries] == [1, 2, 3, 4]
    assert first.entries[0].kind == "call.started"
    assert first.more
    rest = await ask(call_log, CallLogRequest(call="call_1", after=4), keys.operator)
    assert ([e.seq for e in rest.entries], rest.more) == ([5, 6], False)


@pytest.mark.parametrize(
    ("call", "key", "error"),
    [
        ("call_1", None, Unauthorized),
        ("call_1", "production", Forbidden),  # a fleet key is not an operator's
        ("call_nobody", "operator", NotFound),
    ],
)
async def test_a_key_and_a_known_call_are_needed(
    call_log: Replica, keys: Keys, call: str, key: str | None, error: type[Exception]
) -> None:
    await call_log.post("/v1/calls", json=opening("call_1"), headers=bearer(keys.production))
    secret = None if key is None else getattr(keys, key)
    with pytest.raises(error):
        await ask(call_log, CallLogRequest(call=call), secret)


@pytest.mark.parametrize(
    "body",
    [
        b"{not json",
        b'{"call": "not a call"}',
        b'{"call": ""}',
        b'{"call": "call_1", "after": -1}',
        b'{"call": "call_1", "limit": 0}',
        b'{"call": "call_1", "limit": 1001}',
        b'{"type": "calls.log.v1", "call": "call_1"}',
        b"[]",
    ],
)
async def test_a_request_that_is_no_call_log_request_is_a_bad_request(
    call_log: Replica, keys: Keys, body: bytes
) -> None:
    bus = bus_of(call_log)
    msg = await bus.client.request(
        bus.subjects.ops_calls_log, body, timeout=2, headers=bearer(keys.operator)
    )
    assert msg.headers is not None
    assert msg.headers["Nats-Service-Error-Code"] == "400"
    assert b"not a CallLogRequest" in msg.data


def test_a_page_keeps_under_its_budget_and_an_entry_too_large_alone_is_omitted() -> None:
    at = dt.datetime(2026, 11, 30, tzinfo=dt.UTC)
    small = [LoggedEntry(seq=n, kind="turn.user", ts=at, data={"text": "x" * 50}) for n in (1, 2)]
    one = len(encode(small[0]))
    assert page_of(small, 2 * one) == (small, False)
    assert page_of(small, 2 * one - 1) == (small[:1], True)
    huge = LoggedEntry(seq=1, kind="turn.agent", ts=at, data={"text": "y" * 5000})
    page, cut = page_of([huge, small[1]], 1000)
    assert ([e.seq for e in page], cut) == ([1, 2], False)
    assert page[0].data == {OMITTED: len(encode(huge))}


async def test_the_recordings_that_failed_lately_are_counted_by_environment(
    call_log: Replica, keys: Keys
) -> None:
    """``calls.recordings-failed`` (what ``doctor`` counts, issue 19): the window's failures,
    not older ones nor other entries, the newest one's call and reason; an operator's verb."""
    now = dt.datetime.now(dt.UTC)
    written = {
        "call_1": now - dt.timedelta(minutes=5),
        "call_2": now - dt.timedelta(minutes=1),
        "call_3": now - dt.timedelta(hours=3),  # before the window
    }
    for call, at in written.items():
        await call_log.post("/v1/calls", json=opening(call), headers=bearer(keys.production))
        failed = {
            "kind": "call.recording_failed",
            "ts": at.isoformat(),
            "data": {"reason": f"{call}: UploadPart on recordings: 503 SlowDown", "job": "answer"},
        }
        body = {"after": 0, "entries": [entry(0, ts=at.isoformat()), failed]}
        answer = await call_log.post(
            f"/v1/calls/{call}/entries", json=body, headers=bearer(keys.production)
        )
        assert answer.status_code == 200, answer.text
    bus = bus_of(call_log)
    subject = bus.subjects.ops_recordings_failed
    said = await bus.request(
        subject, RecordingsFailedRequest(minutes=60), RecordingsFailedCount,
        headers=bearer(keys.operator),
    )  # fmt: skip
    assert (said.count, said.environments) == (2, {"production": 2})
    assert (said.last_call, said.last_reason) == (
        "call_2",
        "call_2: UploadPart on recordings: 503 SlowDown",
    )
    assert now - dt.timedelta(minutes=61) < said.since < now
    wider = await bus.request(
        subject, RecordingsFailedRequest(minutes=240), RecordingsFailedCount,
        headers=bearer(keys.operator),
    )  # fmt: skip
    assert wider.count == 3
    with pytest.raises(Forbidden):  # a fleet key is not an operator's
        await bus.request(
            subject, RecordingsFailedRequest(), RecordingsFailedCount,
            headers=bearer(keys.production),
        )  # fmt: skip
