"""pytest fixtures for the LiveKit stand-in; import them into a conftest.py.

    from pinecall_loadlab.livekit.testing import *  # noqa: F403

- `standin_config` → `StandInConfig` (port 0, offer deadline 3 s); override it in a test module;
- `standin` → a started `StandIn`, closed after the test;
- `livekit_api` → livekit-api's `LiveKitAPI` on it, with an admin key;
- `webhook_sink` → a loopback receiver; its URL is already in the stand-in's webhook URLs;
- `lab_workers` → `LabWorkers`: start unmodified livekit-agents `AgentServer`s on the stand-in and
  get their worker ids once registered; all are closed after the test.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
from aiohttp import web
from livekit import api

from pinecall_loadlab import serving

from .config import StandInConfig
from .labagents import LabWorkers
from .server import StandIn

API_KEY, API_SECRET = "lab-key", "lab-secret-of-at-least-32-characters"

__all__ = [
    "API_KEY",
    "API_SECRET",
    "LabWorkers",
    "WebhookSink",
    "lab_workers",
    "livekit_api",
    "standin",
    "standin_config",
    "webhook_sink",
]


@dataclass
class Received:
    """One webhook POST as it arrived: raw body bytes and headers."""

    body: bytes
    headers: dict[str, str]


@dataclass
class WebhookSink:
    """Collects webhook POSTs; answers 200, or 503 to the next `fail_next` of them."""

    url: str = ""
    received: list[Received] = field(default_factory=list)
    fail_next: int = 0
    _arrived: asyncio.Event = field(default_factory=asyncio.Event)

    async def handle(self, request: web.Request) -> web.Response:
        self.received.append(Received(await request.read(), dict(request.headers)))
        self._arrived.set()
        if self.fail_next > 0:
            self.fail_next -= 1
            return web.Response(status=503)
        return web.Response(status=200)

    async def wait_for(self, count: int) -> list[Received]:
        """Wait until `count` POSTs have arrived (bound it with `asyncio.timeout`)."""
        while len(self.received) < count:
            self._arrived.clear()
            await self._arrived.wait()
        return self.received[:count]


@pytest.fixture
async def webhook_sink() -> AsyncIterator[WebhookSink]:
    sink = WebhookSink()
    app = web.Application()
    app.router.add_post("/webhook", sink.handle)
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    sink.url = f"http://127.0.0.1:{port}/webhook"
    yield sink
    await serving.stop(runner)


@pytest.fixture
def standin_config(webhook_sink: WebhookSink) -> StandInConfig:
    """Port 0, the lab's key, webhooks to `webhook_sink`, the source-faithful 3 s offer deadline
    and a fixed draw seed."""
    return StandInConfig(
        keys={API_KEY: API_SECRET},
        port=0,
        webhook_urls=[webhook_sink.url],
        offer_deadline_s=3.0,
        seed=7,
        webhook_backoff_min_s=0.05,
        webhook_backoff_max_s=0.2,
    )


@pytest.fixture
async def standin(standin_config: StandInConfig) -> AsyncIterator[StandIn]:
    async with StandIn(standin_config) as lk:
        yield lk


@pytest.fixture
async def livekit_api(standin: StandIn) -> AsyncIterator[api.LiveKitAPI]:
    lkapi = api.LiveKitAPI(standin.url, API_KEY, API_SECRET)
    yield lkapi
    await lkapi.aclose()


@pytest.fixture
async def lab_workers(standin: StandIn) -> AsyncIterator[LabWorkers]:
    workers = LabWorkers(standin, API_KEY, API_SECRET)
    yield workers
    await workers.aclose()
