"""``create_app``: the dispatcher's Litestar app; Granian serves it as a factory."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from functools import partial

import httpx
from litestar import Litestar
from litestar.datastructures import State

from pinecall_clients.calllog import CallLogClient
from pinecall_dispatcher import api, calls_api, numbers_api
from pinecall_dispatcher.followups.dialler import Dial
from pinecall_dispatcher.metrics import Metrics
from pinecall_dispatcher.ops import VERSION, start_ops
from pinecall_dispatcher.service import DispatcherService
from pinecall_dispatcher.settings import DispatcherSettings
from pinecall_dispatcher.store import Store
from pinecall_servicekit import db
from pinecall_servicekit.db import utcnow
from pinecall_servicekit.http import service_app
from pinecall_servicekit.lifespan import Held, Opened, service_lifespan

HANDLERS = [*api.ROUTES, *numbers_api.ROUTES, *calls_api.ROUTES]
"""Every route this service serves; the chart's ingress is tested against it
(``tests/deploy/test_numbers.py``)."""


def create_app(
    settings: DispatcherSettings | None = None,
    *,
    call_log: httpx.AsyncBaseTransport | None = None,
    dial: Dial | None = None,
    clock: Callable[[], dt.datetime] = utcnow,
) -> Litestar:
    """The dispatcher app; connections open in its lifespan and close when it ends.

    call-log (``fleet.full``; a dead worker's call read, ended drained, called back) is reached
    at ``PINECALL_CALL_LOG_URL`` over HTTP through its one client, or through ``call_log`` when
    given (a test's in-process replica); the roster over NATS. Both with the service key.
    ``dial`` places a follow-up's try and ``clock`` is the dialler's
    (:class:`pinecall_dispatcher.service.DispatcherService`).
    """
    settings = settings or DispatcherSettings.from_env()
    held: Held[DispatcherService] = Held()
    metrics = Metrics()

    async def start(app: Litestar, opened: Opened) -> None:
        calls = CallLogClient(settings.call_log_url, settings.service_key or "", transport=call_log)
        opened.on_close(calls.aclose)
        service = DispatcherService(
            settings,
            opened.bus,
            Store(opened.engine),
            opened.keyring(cache_s=settings.key_cache_s),
            metrics,
            calls=calls,
            dial=dial,
            clock=clock,
        )
        await opened.start(service)
        opened.on_close((await start_ops(service)).stop)
        app.state.dispatcher = opened.hold(held, service)

    async def readiness(app_state: State) -> dict[str, bool]:
        service = held.now
        return {
            "postgres": bool(service and await service.store.answers()),
            "nats": bool(service and service.bus.connected),
            "consumer": bool(service and service.consuming.is_set()),
        }

    # every write is retried by a redelivered event or the next sweep: no pre-ping (the offer
    # path's transactions are its latency)
    engine = partial(db.create_engine, pool_size=settings.db_pool_size, pre_ping=False)
    return service_app(
        service="dispatcher",
        version=VERSION,
        route_handlers=HANDLERS,
        lifespan=[service_lifespan("dispatcher", settings, start, engine=engine)],
        registry=metrics.registry,
        readiness=readiness,
    )
