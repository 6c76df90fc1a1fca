"""``reaper serve``'s app: /healthz, /readyz (ready once a reap read call-log and every LiveKit),
/metrics, and problem details for what it does not serve; the loop runs in its lifespan."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from pinecall_loadlab.livekit import StandIn
from pinecall_loadlab.livekit.testing import API_KEY, API_SECRET
from pinecall_reaper.app import create_app
from pinecall_reaper.reaper import Reaper
from pinecall_reaper.settings import ReaperSettings
from pinecall_servicekit.bus import Bus
from pinecall_servicekit.testing.apps import Replica, running
from pinecall_servicekit.testing.metrics import unregistered
from pinecall_testkit.call_log import Keys, Process, one_served

PROBLEM = "application/problem+json"


@pytest.fixture
async def call_log_process(
    database_url: str, nats_url: str, nats_namespace: str
) -> AsyncIterator[Process]:
    async with one_served(database_url, nats_url, nats_namespace) as replica:
        yield replica


@pytest.fixture
def nats_at(nats_url: str, nats_namespace: str) -> tuple[str, str]:
    return nats_url, nats_namespace


def settings(
    call_log: Process, keys: Keys, livekit_url: str, nats_at: tuple[str, str]
) -> ReaperSettings:
    return ReaperSettings.from_env(
        {},
        nats_url=nats_at[0],
        nats_namespace=nats_at[1],
        call_log_url=call_log.url,  # no roster answers on NATS: LIVEKIT_URL is every one's
        service_key=keys.service,
        livekit_url=livekit_url,
        livekit_api_key=API_KEY,
        livekit_api_secret=API_SECRET,
        reap_every_s=3600,
        log_format="text",
    )


async def swept(app: Replica) -> Reaper:
    reaper: Reaper = app.app.state.reaper
    async with asyncio.timeout(60):
        await reaper.reaped_once.wait()
    return reaper


async def test_ready_after_a_reap_that_read_everything_and_its_metrics(
    call_log_process: Process, keys: Keys, standin: StandIn, nats_at: tuple[str, str]
) -> None:
    async with running(create_app(settings(call_log_process, keys, standin.url, nats_at))) as app:
        await swept(app)
        ready = await app.get("/readyz")
        assert (ready.status_code, ready.json()) == (
            200,
            {"ready": True, "checks": {"swept": True, "nats": True}},
        )
        # how doctor finds a reaper up: its nats.micro service answers discovery
        bus = await Bus.connect(*nats_at, name="test")
        try:
            pinged = await bus.ping(bus.subjects.reaper_service)
        finally:
            await bus.close()
        assert pinged.name == bus.subjects.reaper_service
        assert (await app.get("/healthz")).status_code == 200
        metrics = (await app.get("/metrics")).text
        assert "pinecall_reaper_reaps_total 1.0" in metrics
        assert 'pinecall_reaper_calls_total{why="no_agent"} 0.0' in metrics
        assert unregistered(metrics, "reaper") == []
        for method, path, status in (("GET", "/v1/nothing", 404), ("POST", "/healthz", 405)):
            r = await app.request(method, path)
            assert (r.status_code, r.headers["content-type"]) == (status, PROBLEM)
            assert r.json()["status"] == status


async def test_not_ready_while_a_livekit_does_not_answer(
    call_log_process: Process, keys: Keys, nats_at: tuple[str, str]
) -> None:
    nowhere = "http://127.0.0.1:9"
    async with running(create_app(settings(call_log_process, keys, nowhere, nats_at))) as app:
        reaper = await swept(app)
        assert reaper.last is not None
        assert len(reaper.last.failed) == 1
        ready = await app.get("/readyz")
        assert (ready.status_code, ready.json()["checks"]) == (503, {"swept": False, "nats": True})
        assert "pinecall_reaper_failures_total 1.0" in (await app.get("/metrics")).text
