"""The roster's client: the heartbeat on a mock transport, the reads over real NATS from a stand-in
of the roster's ops service; every failure one of the roster's errors, carrying the key as sent."""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator

import httpx
import pytest

from pinecall_clients.errors import RosterRefused, RosterUnavailable
from pinecall_clients.roster import RosterClient
from pinecall_contracts.base import decode
from pinecall_contracts.fleet import (
    FleetListRequest,
    FleetRecord,
    FleetRecords,
    RosterSnapshot,
    WorkerHeartbeat,
)
from pinecall_servicekit.bus import Bus
from pinecall_servicekit.errors import Forbidden

NAME = "pinecall/worker-a.1791067258"
BEAT = WorkerHeartbeat(
    fleet="pinecall", worker=NAME, agent_name=NAME, active=1, max_jobs=8, load=0.125
)


def answering(status: int, body: bytes, seen: list[httpx.Request]) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(status, content=body)

    return httpx.MockTransport(handle)


async def test_a_heartbeat_carries_the_fleet_key_and_gets_the_rosters_answer() -> None:
    seen: list[httpx.Request] = []
    reply = b'{"type": "fleet.heartbeat_reply.v1", "cordoned": true, "fleet_full": false}'
    transport = answering(200, reply, seen)
    async with RosterClient("pck_k", base_url="http://roster", transport=transport) as roster:
        answer = await roster.heartbeat(BEAT, timeout_s=5.0)
    assert (answer.cordoned, answer.fleet_full) == (True, False)
    [request] = seen
    assert (request.method, request.url.path) == ("POST", "/v1/fleet/heartbeat")
    assert request.headers["authorization"] == "Bearer pck_k"
    assert request.headers["content-type"] == "application/json"
    assert decode(request.content, WorkerHeartbeat) == BEAT


@pytest.mark.parametrize(
    ("status", "body", "error"),
    [
        (
            403,
            b'{"title": "Forbidden", "status": 403, "detail": "a key of sandbox"}',
            RosterRefused,
        ),
        (422, b"not a problem detail", RosterRefused),
        (503, b'{"title": "Unavailable", "status": 503}', RosterUnavailable),
        (200, b'{"cordoned": "maybe"}', RosterUnavailable),
    ],
)
async def test_a_heartbeat_refused_or_unanswered_is_one_of_the_rosters_errors(
    status: int, body: bytes, error: type[Exception]
) -> None:
    transport = answering(status, body, [])
    async with RosterClient("pck_k", base_url="http://roster", transport=transport) as roster:
        with pytest.raises(error) as raised:
            await roster.heartbeat(BEAT, timeout_s=5.0)
    if isinstance(raised.value, RosterRefused):
        assert raised.value.status == status
        assert raised.value.problem.status == status


async def test_a_heartbeat_nobody_answers_is_unavailable() -> None:
    def down(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("nobody", request=request)

    transport = httpx.MockTransport(down)
    async with RosterClient("pck_k", base_url="http://roster", transport=transport) as roster:
        with pytest.raises(RosterUnavailable, match="the roster did not answer"):
            await roster.heartbeat(BEAT, timeout_s=5.0)


async def test_asking_through_a_transport_not_given_is_a_type_error() -> None:
    async with RosterClient("pck_k", base_url="http://roster") as worker:
        with pytest.raises(TypeError, match="read over NATS"):
            await worker.fleets()
    with pytest.raises(TypeError, match="goes over HTTP"):
        await RosterClient("pck_k").heartbeat(BEAT, timeout_s=1.0)


@pytest.fixture
async def bus(nats_url: str, nats_namespace: str) -> AsyncIterator[Bus]:
    bus = await Bus.connect(nats_url, nats_namespace, name="test")
    yield bus
    await bus.close()


async def test_the_reads_go_over_nats_with_the_key_and_a_refusal_is_the_rosters_answer(
    bus: Bus,
) -> None:
    """A stand-in of the roster's ops service: it answers the key it was told, and refuses
    any other as the roster does (403)."""
    asked: list[tuple[str | None, str | None]] = []
    rows = FleetRecord(name="pinecall", environment="production", livekit_url="ws://lk")

    async def records(request: FleetListRequest, headers: dict[str, str]) -> FleetRecords:
        asked.append((request.fleet, headers.get("Authorization")))
        if headers.get("Authorization") != "Bearer pck_service":
            raise Forbidden("an app key cannot do this (needs service or operator)")
        return FleetRecords(fleets=[rows])

    async def fleet_list(request: FleetListRequest, headers: dict[str, str]) -> RosterSnapshot:
        asked.append((request.fleet, headers.get("Authorization")))
        return RosterSnapshot(fleets=[], at=dt.datetime.now(dt.UTC))

    micro = await bus.add_service(bus.subjects.ops_service, version="0.0.1", description="test")
    await bus.add_endpoint(
        micro, name="records", subject=bus.subjects.ops_fleet_records, kind=FleetListRequest,
        handler=records,
    )  # fmt: skip
    await bus.add_endpoint(
        micro, name="list", subject=bus.subjects.ops_fleet_list, kind=FleetListRequest,
        handler=fleet_list,
    )  # fmt: skip
    try:
        service = RosterClient("pck_service", bus=bus)
        assert (await service.fleets("pinecall")).fleets == [rows]
        assert (await service.rows()).fleets == []
        with pytest.raises(RosterRefused) as refused:
            await RosterClient("pck_app", bus=bus).fleets()
        assert refused.value.status == 403
        assert asked == [
            ("pinecall", "Bearer pck_service"),
            (None, "Bearer pck_service"),
            (None, "Bearer pck_app"),
        ]
    finally:
        await micro.stop()


async def test_a_read_no_replica_answers_is_unavailable(bus: Bus) -> None:
    with pytest.raises(RosterUnavailable, match="nobody answered"):
        await RosterClient("pck_service", bus=bus).rows()
