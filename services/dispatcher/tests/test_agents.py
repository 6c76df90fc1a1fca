"""Which agents exist, as the dispatcher asks call-log (issue 16, "Agents, as data"): answers
remembered, one lookup in flight per agent, and call-log's silence failing open on the last answer
known. call-log is an ``httpx.MockTransport`` here (the token endpoint and a ring against a real
call-log are in ``tests/dispatcher/test_agents.py``)."""

from __future__ import annotations

import asyncio
import datetime as dt
import json

import httpx

from pinecall_clients.calllog import CallLogClient
from pinecall_dispatcher.agents import Agents

DEFINED = {("production", "org_acme", "support-bot")}
VERSION = {
    "type": "agents.version.v1",
    "org": "org_acme",
    "environment": "production",
    "version": 1,
    "prompt_hash": "0" * 64,
    "updated_at": dt.datetime(2026, 12, 2, tzinfo=dt.UTC).isoformat(),
    "definition": {"type": "agents.definition.v1", "name": "support-bot", "prompt": "Hi."},
}
NOT_FOUND = {"title": "Not found", "status": 404, "code": "not_found", "detail": "no agent"}


class CallLog:
    """call-log's ``GET /v1/agents/{agent}`` as a mock transport: answers from :data:`DEFINED`,
    or 503, or nothing (held until :attr:`release` is set); counts what it was asked."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str, str]] = []
        self.down = False
        self.hold = False
        self.release = asyncio.Event()

    async def handle(self, request: httpx.Request) -> httpx.Response:
        agent = request.url.path.rsplit("/", 1)[-1]
        key = (request.url.params["environment"], request.url.params["org"], agent)
        self.asked.append(key)
        if self.hold:
            await self.release.wait()
        if self.down:
            return httpx.Response(503, json=NOT_FOUND | {"status": 503})
        if key in DEFINED:
            return httpx.Response(200, content=json.dumps(VERSION))
        return httpx.Response(404, json=NOT_FOUND)


def agents_of(log: CallLog, *, cache_s: float = 5.0, within_s: float = 1.0) -> Agents:
    client = CallLogClient("http://call-log.test", "key", transport=httpx.MockTransport(log.handle))
    return Agents(client, cache_s=cache_s, within_s=within_s)


async def test_an_answer_is_remembered_and_a_burst_asks_call_log_once() -> None:
    log = CallLog()
    agents = agents_of(log)
    said = await asyncio.gather(
        *(agents.lookup("production", "org_acme", "support-bot") for _ in range(20))
    )
    assert set(said) == {"defined"}
    assert await agents.lookup("production", "org_acme", "nobody") == "unknown"
    assert await agents.lookup("production", "org_acme", "nobody") == "unknown"
    assert await agents.lookup("production", "org_acme", "support-bot") == "defined"
    assert log.asked == [
        ("production", "org_acme", "support-bot"),
        ("production", "org_acme", "nobody"),
    ]


async def test_an_agent_is_its_orgs_in_one_environment() -> None:
    log = CallLog()
    agents = agents_of(log)
    assert await agents.lookup("sandbox", "org_acme", "support-bot") == "unknown"
    assert await agents.lookup("production", "org_other", "support-bot") == "unknown"


async def test_an_answer_past_its_time_is_asked_again() -> None:
    """``cache_s`` 0: every lookup asks, so a definition put is seen at once (within
    ``cache_s`` in general)."""
    log = CallLog()
    agents = agents_of(log, cache_s=0.0)
    key = ("production", "org_acme", "late-bot")
    assert await agents.lookup(*key) == "unknown"
    DEFINED.add(key)
    try:
        assert await agents.lookup(*key) == "defined"
    finally:
        DEFINED.discard(key)
    assert log.asked == [key, key]


async def test_a_ring_that_names_no_org_is_unknown_and_asks_nobody() -> None:
    log = CallLog()
    agents = agents_of(log)
    assert await agents.lookup("production", "", "pinecall") == "unknown"
    assert await agents.lookup("production", "org acme", "support-bot") == "unknown"
    assert log.asked == []


async def test_call_log_down_fails_open_on_the_last_answer_known() -> None:
    log = CallLog()
    agents = agents_of(log, cache_s=0.0)
    assert await agents.lookup("production", "org_acme", "support-bot") == "defined"
    assert await agents.lookup("production", "org_acme", "nobody") == "unknown"
    log.down = True
    assert await agents.lookup("production", "org_acme", "support-bot") == "defined"
    assert await agents.lookup("production", "org_acme", "nobody") == "unknown"  # still refused
    assert await agents.lookup("production", "org_acme", "never-asked") == "unanswered"
    assert len(log.asked) == 5  # one try each: a 503 is not retried here


async def test_call_log_silent_is_asked_once_per_cache_time_not_once_per_ring() -> None:
    log = CallLog()
    log.hold = True
    agents = agents_of(log, within_s=0.05)
    said = await asyncio.gather(
        *(agents.lookup("production", "org_acme", "support-bot") for _ in range(5))
    )
    assert set(said) == {"unanswered"}
    assert await agents.lookup("production", "org_acme", "support-bot") == "unanswered"
    assert log.asked == [("production", "org_acme", "support-bot")]
    log.release.set()
