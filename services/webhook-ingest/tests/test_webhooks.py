"""LiveKit's webhooks in, each event once on the stream out; anything unsigned refused and counted."""

from __future__ import annotations

import asyncio
import datetime as dt
import json

import msgspec
import pytest
from livekit.api import CreateRoomRequest, LiveKitAPI

from pinecall_contracts.livekit import LiveKitEvent, WebhookDropped
from pinecall_loadlab.livekit.testing import API_KEY, API_SECRET, WebhookSink
from pinecall_servicekit.bus import Bus
from pinecall_servicekit.testing.apps import Replica
from pinecall_servicekit.testing.metrics import unregistered
from pinecall_testkit.webhook_ingest import (
    AGENT_NAME,
    SANDBOX_KEY,
    SANDBOX_SECRET,
    agent_left,
    sign,
)

BASE = "/v1/livekit/webhook"
PATH = f"{BASE}?world=production"
JSON = {"content-type": "application/webhook+json"}


def bus_of(ingest: Replica) -> Bus:
    bus: Bus = ingest.app.state.ingest.bus
    return bus


async def stored(ingest: Replica) -> list[LiveKitEvent]:
    """Every event on the test's LiveKit stream, in order."""
    bus = bus_of(ingest)
    info = await bus.js.stream_info(bus.subjects.livekit_stream)
    out = []
    for seq in range(info.state.first_seq, info.state.last_seq + 1):
        if info.state.messages == 0:
            break
        msg = await bus.js.get_msg(bus.subjects.livekit_stream, seq)
        assert msg.data is not None
        out.append(msgspec.json.decode(msg.data, type=LiveKitEvent))
    return out


async def dropped(ingest: Replica) -> dict[str, int]:
    """The drops stream's count per ``<environment>.<reason>``, and the last drop's detail."""
    bus = bus_of(ingest)
    stream = bus.subjects.webhook_drops_stream
    counts = await bus.counts(stream, bus.subjects.webhooks_dropped)
    assert counts is not None
    prefix = bus.subjects.webhooks_dropped.removesuffix(">")
    return {subject.removeprefix(prefix): n for subject, n in counts.items()}


async def test_a_signed_webhook_is_stored_once_with_every_fact_a_consumer_reads(
    ingest: Replica,
) -> None:
    body = agent_left()
    r = await ingest.post(
        PATH, content=body, headers=JSON | {"authorization": sign(body, API_KEY, API_SECRET)}
    )
    assert (r.status_code, r.json()) == (200, {"stored": True})
    [event] = await stored(ingest)
    assert (event.id, event.environment, event.event, event.room) == (
        "EV_agentleft1",
        "production",
        "participant_left",
        "call-1",
    )
    assert (event.participant, event.participant_kind, event.disconnect_reason) == (
        "agent-AJ_1",
        "AGENT",
        "CONNECTION_TIMEOUT",
    )
    assert (event.room_sid, event.participant_attributes) == ("RM_1", {"lk.agent_name": AGENT_NAME})
    assert event.body.encode() == body  # kept as it came, for compatibility: nobody reads it


async def test_a_second_delivery_is_dropped_and_counted(ingest: Replica) -> None:
    body = agent_left()
    headers = JSON | {"authorization": sign(body, API_KEY, API_SECRET)}
    first = await ingest.post(PATH, content=body, headers=headers)
    again = await ingest.post(PATH, content=body, headers=headers)
    assert (first.json(), again.json()) == ({"stored": True}, {"stored": False})
    assert len(await stored(ingest)) == 1
    assert await dropped(ingest) == {"production.duplicate": 1}
    metrics = (await ingest.get("/metrics")).text
    assert 'pinecall_webhooks_duplicate_total{environment="production"} 1.0' in metrics
    assert (
        'pinecall_webhooks_total{environment="production",event="participant_left"} 1.0' in metrics
    )
    assert 'pinecall_webhook_to_stream_seconds_count{environment="production"} 1.0' in metrics
    assert unregistered(metrics, "webhook-ingest") == []


async def test_a_bearer_prefix_added_by_a_proxy_is_tolerated(ingest: Replica) -> None:
    body = agent_left()
    token = sign(body, API_KEY, API_SECRET)
    r = await ingest.post(PATH, content=body, headers=JSON | {"authorization": f"Bearer {token}"})
    assert r.json() == {"stored": True}


async def test_each_environment_verifies_with_its_own_keys(ingest: Replica) -> None:
    body = agent_left("EV_sandbox1")
    sandbox = sign(body, SANDBOX_KEY, SANDBOX_SECRET)
    assert (
        await ingest.post(
            f"{BASE}?world=sandbox", content=body, headers=JSON | {"authorization": sandbox}
        )
    ).status_code == 200
    # the sandbox's signature is no good for production, nor production's for the sandbox
    assert (
        await ingest.post(PATH, content=body, headers=JSON | {"authorization": sandbox})
    ).status_code == 401
    production = sign(body, API_KEY, API_SECRET)
    assert (
        await ingest.post(
            f"{BASE}?world=sandbox", content=body, headers=JSON | {"authorization": production}
        )
    ).status_code == 401
    assert [e.environment for e in await stored(ingest)] == ["sandbox"]


def _refusals() -> dict[str, tuple[bytes, dict[str, str]]]:
    """Each way a webhook fails to verify: its body and headers, signed now (a token signed at
    collection would expire before a long run reaches the test)."""
    body = agent_left()
    reserialized = json.dumps(json.loads(body), indent=2).encode()
    return {
        "unsigned": (body, {}),
        "malformed_token": (body, {"authorization": "not-a-jwt"}),
        "forged": (
            body,
            {"authorization": sign(body, API_KEY, "another-secret-of-at-least-32-chars!")},
        ),
        "expired": (
            body,
            {"authorization": sign(body, API_KEY, API_SECRET, dt.timedelta(minutes=-10))},
        ),
        "hash_mismatch": (reserialized, {"authorization": sign(body, API_KEY, API_SECRET)}),
        "unknown_key": (body, {"authorization": sign(body, "someone-else", API_SECRET)}),
    }


@pytest.mark.parametrize("reason", list(_refusals()))
async def test_a_webhook_that_does_not_verify_is_refused_counted_and_not_published(
    ingest: Replica, reason: str
) -> None:
    body, headers = _refusals()[reason]
    r = await ingest.post(PATH, content=body, headers=JSON | headers)
    assert r.status_code == 401
    assert r.headers["content-type"].startswith("application/problem+json")
    assert r.json()["code"] == "unauthorized"
    assert await stored(ingest) == []
    metrics = (await ingest.get("/metrics")).text
    assert (
        f'pinecall_webhooks_refused_total{{environment="production",reason="{reason}"}} 1.0'
        in metrics
    )
    # kept for doctor, with what the refusal said
    assert await dropped(ingest) == {f"production.{reason}": 1}
    bus = bus_of(ingest)
    last = await bus.last(
        bus.subjects.webhook_drops_stream,
        bus.subjects.webhook_dropped("production", reason),
        WebhookDropped,
    )
    assert last is not None
    assert (last.environment, last.reason) == ("production", reason)
    assert last.detail == r.json()["detail"].removeprefix("webhook refused: ")


@pytest.mark.parametrize(
    ("query", "body", "status", "drop"),
    [
        ("?world=mars", None, 404, "_unknown.unknown_environment"),
        ("?world=Not%20A%20World", None, 400, None),  # refused before it is read
        # no environment named: never taken for production's (another LiveKit's events)
        ("", None, 400, "_unknown.no_environment"),
        ("?world=production", b'{"event": 7}', 400, "production.not_a_webhook"),
        ("?world=production", b"[]", 400, "production.not_a_webhook"),
        ("?world=production", b'{"event": "room_started"}', 400, "production.not_a_webhook"),
    ],
)
async def test_bad_input_is_a_problem_and_nothing_is_published(
    ingest: Replica, query: str, body: bytes | None, status: int, drop: str | None
) -> None:
    body = body or agent_left()
    r = await ingest.post(
        f"{BASE}{query}",
        content=body,
        headers=JSON | {"authorization": sign(body, API_KEY, API_SECRET)},
    )
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    assert await stored(ingest) == []
    assert await dropped(ingest) == ({} if drop is None else {drop: 1})


async def test_a_replica_answers_discovery(ingest: Replica) -> None:
    bus = bus_of(ingest)
    pong = await bus.ping(bus.subjects.ingest_service)
    assert pong.name == bus.subjects.ingest_service


async def test_the_stand_ins_own_webhooks_verify_and_each_is_stored_once(
    ingest: Replica, livekit_api: LiveKitAPI, webhook_sink: WebhookSink
) -> None:
    await livekit_api.room.create_room(CreateRoomRequest(name="call-e2e"))
    async with asyncio.timeout(10):
        [delivery] = await webhook_sink.wait_for(1)
    for _ in range(2):  # LiveKit retries: the same bytes, the same id
        r = await ingest.post(
            PATH,
            content=delivery.body,
            headers={
                "authorization": delivery.headers["Authorization"],
                "content-type": delivery.headers["Content-Type"],
            },
        )
        assert r.status_code == 200
    [event] = await stored(ingest)
    assert (event.event, event.room, event.environment) == (
        "room_started",
        "call-e2e",
        "production",
    )
    assert event.room_sid is not None
    assert event.room_sid.startswith("RM_")
    assert (event.participant, event.participant_kind, event.participant_attributes) == (
        None,
        None,
        {},
    )


async def test_the_livekit_stream_is_made_as_the_subject_registry_says(ingest: Replica) -> None:
    """The dispatcher makes the same stream when it starts first: one set of settings."""
    bus = bus_of(ingest)
    settings = bus.subjects.livekit_stream_settings
    info = await bus.js.stream_info(settings.name)
    assert info.config.subjects == list(settings.subjects)
    assert (info.config.duplicate_window, info.config.max_age) == (
        settings.duplicate_window_s,
        settings.max_age_s,
    )
