"""``create_app``: the call log's Litestar app; Granian serves it as a factory."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from litestar import Litestar
from litestar.datastructures import State

from pinecall_call_log import api
from pinecall_call_log.metrics import registry_for
from pinecall_call_log.ops import start_ops
from pinecall_call_log.service import CallLogService
from pinecall_call_log.settings import CallLogSettings
from pinecall_call_log.store import Store
from pinecall_servicekit import db
from pinecall_servicekit.bus import Bus
from pinecall_servicekit.http import service_app
from pinecall_servicekit.keys import KeyRing
from pinecall_servicekit.telemetry import configure_telemetry

VERSION = "0.1.0"


def create_app(settings: CallLogSettings | None = None) -> Litestar:
    """The call-log app; connections open in its lifespan and close in its ``finally``."""
    settings = settings or CallLogSettings.from_env()
    state: dict[str, CallLogService | None] = {"call_log": None}

    @asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        configure_telemetry("call-log", level=settings.log_level, fmt=settings.log_format)
        engine = db.create_engine(
            settings.database_url, pool_size=settings.db_pool_size, max_overflow=0
        )
        service: CallLogService | None = None
        ops = None
        try:
            bus = await Bus.connect(settings.nats_url, settings.nats_namespace, name="call-log")
            try:
                service = CallLogService(
                    settings, bus, Store(engine), KeyRing(engine, bus, cache_s=settings.key_cache_s)
                )
                await service.start()
                ops = await start_ops(service, VERSION)
                app.state.call_log = state["call_log"] = service
                yield
            finally:
                state["call_log"] = None
                if ops is not None:
                    await ops.stop()
                if service is not None:
                    await service.stop()
                await bus.close()
        finally:
            await engine.dispose()

    async def readiness(app_state: State) -> dict[str, bool]:
        service = state["call_log"]
        return {"nats": bool(service and service.bus.connected)}

    return service_app(
        service="call-log",
        version=VERSION,
        route_handlers=api.ROUTES,
        lifespan=[lifespan],
        registry=registry_for(lambda: state["call_log"]),
        readiness=readiness,
    )
