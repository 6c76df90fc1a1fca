"""The overflow against the LiveKit stand-in, the vendor fakes and a call-log process on real
Postgres and NATS (its jobs run in threads of their own, so the call log must be a real server)."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

import pytest
from livekit import api

from pinecall_contracts.base import encode
from pinecall_contracts.calls import CallEvent
from pinecall_contracts.dispatch import JobOffer
from pinecall_labroom import AudioChunk, LabRoom
from pinecall_loadlab.livekit import StandIn
from pinecall_loadlab.livekit.testing import *  # noqa: F403  (the stand-in's fixtures)
from pinecall_loadlab.livekit.testing import API_KEY, API_SECRET
from pinecall_loadlab.vendors import VendorFakes
from pinecall_loadlab.vendors.testing import *  # noqa: F403  (the vendor fakes)
from pinecall_overflow.server import Overflow
from pinecall_overflow.settings import OverflowSettings
from pinecall_servicekit.bus import Bus
from pinecall_testkit.call_log import Keys, Process, make_keys, one_served

SAYS = "Sorry, call back later."
"""A short sentence: the Cartesia fake speaks len / 15 seconds of it, in real time."""


@pytest.fixture
async def keys(database_url: str) -> Keys:
    return await make_keys(database_url)


@pytest.fixture
async def call_log(database_url: str, nats_url: str, nats_namespace: str) -> AsyncIterator[Process]:
    async with one_served(database_url, nats_url, nats_namespace) as replica:
        yield replica


class Sealed:
    """``call.sealed`` as call-log says it on NATS: what a test awaits instead of a sleep."""

    def __init__(self) -> None:
        self.calls: dict[str, CallEvent] = {}
        self._changed = asyncio.Event()

    async def heard(self, event: CallEvent) -> None:
        self.calls[event.call] = event
        self._changed.set()

    async def wait(self, call: str) -> CallEvent:
        """Bound it with ``asyncio.timeout``."""
        while call not in self.calls:
            self._changed.clear()
            await self._changed.wait()
        return self.calls[call]


@pytest.fixture
async def sealed(nats_url: str, nats_namespace: str) -> AsyncIterator[Sealed]:
    bus = await Bus.connect(nats_url, nats_namespace, name="overflow-test")
    seen = Sealed()
    await bus.subscribe(bus.subjects.call_events("sealed"), CallEvent, seen.heard)
    yield seen
    await bus.close()


def settings_for(
    standin: StandIn,
    vendor_fakes: VendorFakes,
    keys: Keys,
    call_log_url: str,
    environ: Mapping[str, str] | None = None,
) -> OverflowSettings:
    """The overflow's settings in the lab, ``environ`` read first (``PINECALL_*``)."""
    return OverflowSettings.from_env(
        environ or {},
        fleet="pinecall",
        fleet_key=keys.production,
        overflow_says=SAYS,
        health_port=0,
        livekit_url=standin.url,
        livekit_api_key=API_KEY,
        livekit_api_secret=API_SECRET,
        call_log_url=call_log_url,
        cartesia_url=vendor_fakes.cartesia_url,
        cartesia_api_key="lab",
        lab_rooms=True,
        drain_timeout_s=30,
        log_format="text",
    )


@asynccontextmanager
async def overflow_of(settings: OverflowSettings) -> AsyncIterator[Overflow]:
    """An overflow running in this loop (its jobs in threads), registered; stopped after."""
    o = Overflow(settings, num_idle_processes=4)  # 4 offers at once from idle
    running = asyncio.create_task(o.run())
    o.exit = running  # type: ignore[attr-defined]
    async with asyncio.timeout(60):
        await o.registered.wait()
    try:
        yield o
    finally:
        if not running.done():
            o.stop()
        async with asyncio.timeout(60):
            await running


@pytest.fixture
async def overflow(
    standin: StandIn, vendor_fakes: VendorFakes, keys: Keys, call_log: Process
) -> AsyncIterator[Overflow]:
    async with overflow_of(settings_for(standin, vendor_fakes, keys, call_log.url)) as o:
        yield o


def job_offer(call: str, room: str, **extra: object) -> JobOffer:
    fields: dict[str, object] = {
        "call": call,
        "fleet": "pinecall",
        "environment": "production",
        "room": room,
        "attempt": 4,
        "agent": "support-bot",
        "org": "org_acme",
        "arrived_at": dt.datetime.now(dt.UTC),
    }
    return JobOffer(**(fields | extra))  # type: ignore[arg-type]


async def offer_to(livekit_api: api.LiveKitAPI, agent_name: str, offer: JobOffer) -> None:
    """The dispatcher's CreateDispatch: ``offer`` as the dispatch's metadata."""
    await livekit_api.agent_dispatch.create_dispatch(
        api.CreateAgentDispatchRequest(
            agent_name=agent_name, room=offer.room, metadata=encode(offer).decode()
        )
    )


def heard(caller: LabRoom) -> list[AudioChunk]:
    """What the caller received from agents, once its room is gone (``closed``)."""
    chunks = []
    while not caller.audio.empty():
        chunks.append(caller.audio.get_nowait())
    return [c for c in chunks if c.sender.startswith("agent-")]


def loud(chunks: list[AudioChunk]) -> bool:
    return any(c.pcm != bytes(len(c.pcm)) for c in chunks)
