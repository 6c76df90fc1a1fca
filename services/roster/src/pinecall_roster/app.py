"""``create_app``: the roster's Litestar app; Granian serves it as a factory."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from litestar import Litestar
from litestar.datastructures import State

from pinecall_roster import api
from pinecall_roster.cordons import CordonBook
from pinecall_roster.metrics import registry_for
from pinecall_roster.ops import VERSION, start_ops
from pinecall_roster.service import RosterService
from pinecall_roster.settings import RosterSettings
from pinecall_roster.store import Store
from pinecall_servicekit import db
from pinecall_servicekit.bus import Bus
from pinecall_servicekit.http import service_app
from pinecall_servicekit.keys import KeyRing
from pinecall_servicekit.telemetry import configure_telemetry


def create_app(settings: RosterSettings | None = None) -> Litestar:
    """The roster app; connections open in its lifespan and close in its ``finally``."""
    settings = settings or RosterSettings.from_env()
    state: dict[str, RosterService | None] = {"roster": None}

    @asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        configure_telemetry("roster", level=settings.log_level, fmt=settings.log_format)
        engine = db.create_engine(settings.database_url)
        bus = await Bus.connect(settings.nats_url, settings.nats_namespace, name="roster")
        service: RosterService | None = None
        ops = None
        try:
            kv = await bus.key_value(bus.subjects.cordons_bucket)
            service = RosterService(
                settings,
                bus,
                Store(engine),
                KeyRing(engine, bus, cache_s=settings.key_cache_s),
                CordonBook(kv, bus.subjects),
            )
            await service.start()
            ops = await start_ops(service)
            app.state.roster = state["roster"] = service
            yield
        finally:
            state["roster"] = None
            if ops is not None:
                await ops.stop()
            if service is not None:
                await service.stop()
            await bus.close()
            await engine.dispose()

    async def readiness(app_state: State) -> dict[str, bool]:
        service: RosterService | None = state["roster"]
        return {
            "postgres": bool(service and await service.store.answers()),
            "nats": bool(service and service.bus.connected),
            "cordons": bool(service and service.cordons.loaded.is_set()),
        }

    return service_app(
        service="roster",
        version=VERSION,
        route_handlers=api.ROUTES,
        lifespan=[lifespan],
        registry=registry_for(lambda: state["roster"]),
        readiness=readiness,
    )
