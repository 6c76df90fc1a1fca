"""What the operator's tools read through the clients, on a mock transport: call-log's entries and
agents' logs, the dispatcher's offers and journals; each refusal or silence one of the clients'
errors, with the key as given."""

from __future__ import annotations

import httpx
import pytest

from pinecall_clients.calllog import Backoff, CallLogClient
from pinecall_clients.dispatcher import DispatcherClient
from pinecall_clients.errors import CallUnknown, DispatcherRefused, DispatcherUnavailable

QUICK = Backoff(first=0.001, most=0.002, jitter=0.0)
LOG = b'{"call": "c1", "state": "sealed", "entries": []}'
AGENT_LOG = b'{"agent": "a", "environment": "sandbox", "entries": []}'
JOURNAL = b'{"call": "c1", "lines": []}'
OFFERS = b'{"fleets": [], "kept": [], "at": "2026-12-02T10:00:00+00:00"}'


def answering(
    answers: dict[str, tuple[int, bytes]], seen: list[httpx.Request]
) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        status, body = answers[request.url.path]
        return httpx.Response(status, content=body)

    return httpx.MockTransport(handle)


async def test_call_logs_entries_and_an_agents_log_are_read_with_the_clients_key() -> None:
    seen: list[httpx.Request] = []
    transport = answering(
        {
            "/v1/calls/c1/entries": (200, LOG),
            "/v1/agents/a/log": (200, AGENT_LOG),
            "/v1/calls/nobody/entries": (404, b'{"title": "Not found", "status": 404}'),
        },
        seen,
    )
    async with CallLogClient("http://log", "pck_op", transport=transport, backoff=QUICK) as log:
        assert (await log.entries("c1")).state == "sealed"
        assert (await log.agent_log("a", environment="sandbox")).environment == "sandbox"
        await log.agent_log("a", after=3)
        with pytest.raises(CallUnknown):
            await log.entries("nobody")
    assert [str(r.url) for r in seen] == [
        "http://log/v1/calls/c1/entries",
        "http://log/v1/agents/a/log?after=0&environment=sandbox",
        "http://log/v1/agents/a/log?after=3",
        "http://log/v1/calls/nobody/entries",
    ]
    assert {r.method for r in seen} == {"GET"}
    assert {r.headers["authorization"] for r in seen} == {"Bearer pck_op"}


async def test_the_dispatchers_offers_and_a_calls_journal() -> None:
    seen: list[httpx.Request] = []
    transport = answering(
        {
            "/v1/ops/offers": (200, OFFERS),
            "/v1/ops/calls/c1/journal": (200, JOURNAL),
            "/v1/ops/calls/c2/journal": (404, b'{"title": "Not found", "status": 404}'),
            "/v1/ops/calls/c3/journal": (503, b"down"),
        },
        seen,
    )
    async with DispatcherClient("http://dispatcher", "pck_op", transport=transport) as ops:
        assert (await ops.offers()).fleets == []
        assert (await ops.journal("c1")).lines == []
        with pytest.raises(DispatcherRefused) as refused:
            await ops.journal("c2")
        assert refused.value.status == 404
        with pytest.raises(DispatcherUnavailable) as down:
            await ops.journal("c3")
        assert down.value.status == 503
    assert {r.headers["authorization"] for r in seen} == {"Bearer pck_op"}
