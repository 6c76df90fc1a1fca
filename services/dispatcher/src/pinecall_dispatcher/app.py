"""``create_app``: the dispatcher's Litestar app; Granian serves it as a factory."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
from litestar import Litestar
from litestar.datastructures import State

from pinecall_clients.calllog import CallLogClient
from pinecall_dispatcher import api
from pinecall_dispatcher.metrics import Metrics
from pinecall_dispatcher.ops import VERSION, start_ops
from pinecall_dispatcher.service import DispatcherService
from pinecall_dispatcher.settings import DispatcherSettings
from pinecall_dispatcher.store import Store
from pinecall_servicekit import db
from pinecall_servicekit.bus import Bus
from pinecall_servicekit.http import service_app
from pinecall_servicekit.keys import KeyRing
from pinecall_servicekit.telemetry import configure_telemetry


def create_app(
    settings: DispatcherSettings | None = None,
    *,
    call_log: httpx.AsyncBaseTransport | None = None,
) -> Litestar:
    """The dispatcher app; connections open in its lifespan and close in its ``finally``.

    call-log (``fleet.full``; a dead worker's call read, ended drained, called back) is reached
    at ``PINECALL_CALL_LOG_URL`` over HTTP through its one client, or through ``call_log`` when
    given (a test's in-process replica); the roster over NATS. Both with the service key.
    """
    settings = settings or DispatcherSettings.from_env()
    state: dict[str, DispatcherService | None] = {"dispatcher": None}
    metrics = Metrics()

    @asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        configure_telemetry("dispatcher", level=settings.log_level, fmt=settings.log_format)
        # every write is retried by a redelivered event or the next sweep: no pre-ping (the
        # offer path's transactions are its latency)
        engine = db.create_engine(
            settings.database_url, pool_size=settings.db_pool_size, pre_ping=False
        )
        calls = CallLogClient(settings.call_log_url, settings.service_key or "", transport=call_log)
        service: DispatcherService | None = None
        ops = None
        try:
            bus = await Bus.connect(settings.nats_url, settings.nats_namespace, name="dispatcher")
            try:
                service = DispatcherService(
                    settings,
                    bus,
                    Store(engine),
                    KeyRing(engine, bus, cache_s=settings.key_cache_s),
                    metrics,
                    calls=calls,
                )
                await service.start()
                ops = await start_ops(service)
                app.state.dispatcher = state["dispatcher"] = service
                yield
            finally:
                state["dispatcher"] = None
                if ops is not None:
                    await ops.stop()
                if service is not None:
                    await service.stop()
                await bus.close()
        finally:
            await calls.aclose()
            await engine.dispose()

    async def readiness(app_state: State) -> dict[str, bool]:
        service = state["dispatcher"]
        return {
            "postgres": bool(service and await service.store.answers()),
            "nats": bool(service and service.bus.connected),
            "consumer": bool(service and service.consuming.is_set()),
        }

    return service_app(
        service="dispatcher",
        version=VERSION,
        route_handlers=api.ROUTES,
        lifespan=[lifespan],
        registry=metrics.registry,
        readiness=readiness,
    )
