"""``create_app``: the reaper's Litestar app (``/healthz``, ``/readyz``, ``/metrics``, OpenAPI);
its lifespan runs the sweep loop. Granian serves it as a factory.

Ready once a sweep has read every LiveKit and call-log without a failure, and while the last one
did (and NATS answers); a sweep that could not read is tried again next minute. Its replicas
answer ``$SRV.PING.<ns>-reaper`` (nats.micro), which is how ``doctor`` finds one up.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from litestar import Litestar
from litestar.datastructures import State

from pinecall_clients.calllog import CallLogClient
from pinecall_clients.roster import RosterClient
from pinecall_reaper.domain import Rules
from pinecall_reaper.fleets import Fleets
from pinecall_reaper.metrics import registry_for
from pinecall_reaper.reaper import Reaper
from pinecall_reaper.settings import ReaperSettings
from pinecall_servicekit.bus import Bus
from pinecall_servicekit.http import service_app
from pinecall_servicekit.telemetry import configure_telemetry

VERSION = "0.1.0"


def create_app(settings: ReaperSettings | None = None) -> Litestar:
    """The reaper's app; the loop starts in its lifespan and is cancelled in its ``finally``."""
    settings = (settings or ReaperSettings.from_env()).check()
    state: dict[str, Any] = {"reaper": None, "bus": None}

    @asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        configure_telemetry("reaper", level=settings.log_level, fmt=settings.log_format)
        rules = Rules(quiet_s=settings.quiet_s, max_call_s=settings.max_call_seconds)
        bus = await Bus.connect(settings.nats_url, settings.nats_namespace, name="reaper")
        try:
            # it serves no verb: its nats.micro service is how doctor finds it up ($SRV.PING)
            await bus.add_service(
                bus.subjects.reaper_service, version=VERSION, description="the calls nobody runs"
            )
            state["bus"] = bus
            key = settings.service_key
            async with CallLogClient(settings.call_log_url, key or "") as log:
                fleets = Fleets(settings, RosterClient(key, bus=bus))
                reaper = Reaper(log, fleets.livekits, rules, every_s=settings.reap_every_s)
                app.state.reaper = state["reaper"] = reaper
                loop = asyncio.create_task(reaper.run(), name="reaper-loop")
                try:
                    yield
                finally:
                    state["reaper"] = None
                    loop.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await loop
                    await reaper.aclose()
        finally:
            state["bus"] = None
            await bus.close()

    async def readiness(app_state: State) -> dict[str, bool]:
        reaper, bus = state["reaper"], state["bus"]
        last = reaper.last if reaper else None
        return {"swept": last is not None and not last.failed, "nats": bool(bus and bus.connected)}

    return service_app(
        service="reaper",
        version=VERSION,
        route_handlers=[],
        lifespan=[lifespan],
        registry=registry_for(lambda: state["reaper"]),
        readiness=readiness,
    )
