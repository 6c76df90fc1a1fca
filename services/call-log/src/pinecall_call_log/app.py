"""``create_app``: the call log's Litestar app; Granian serves it as a factory."""

from __future__ import annotations

from functools import partial

from litestar import Litestar
from litestar.datastructures import State

from pinecall_call_log import api, callbacks, definitions, numbers, recordings, stream
from pinecall_call_log.metrics import registry_for
from pinecall_call_log.ops import start_ops
from pinecall_call_log.service import CallLogService
from pinecall_call_log.settings import CallLogSettings
from pinecall_call_log.sockets import route
from pinecall_call_log.store import Store
from pinecall_servicekit import db
from pinecall_servicekit.http import service_app
from pinecall_servicekit.lifespan import Held, Opened, service_lifespan

VERSION = "0.1.0"


HANDLERS = [
    *api.ROUTES,
    *definitions.ROUTES,
    *numbers.ROUTES,
    *callbacks.ROUTES,
    *recordings.ROUTES,
    *stream.ROUTES,
    *route.ROUTES,
]
"""Every route this service serves; the chart's ingress is tested against it
(``tests/deploy/test_numbers.py``)."""


def create_app(settings: CallLogSettings | None = None) -> Litestar:
    """The call-log app; connections open in its lifespan and close when it ends."""
    settings = settings or CallLogSettings.from_env()
    held: Held[CallLogService] = Held()

    async def start(app: Litestar, opened: Opened) -> None:
        keyring = opened.keyring(cache_s=settings.key_cache_s)
        service = CallLogService(settings, opened.bus, Store(opened.engine), keyring)
        await opened.start(service)
        opened.on_close((await start_ops(service, VERSION)).stop)
        app.state.call_log = opened.hold(held, service)

    async def readiness(app_state: State) -> dict[str, bool]:
        service = held.now
        return {"nats": bool(service and service.bus.connected)}

    # no ping before each transaction (a round trip more for each, 4 % of a replica's samples
    # under `load`, issue 20): every write is retried by its writer, and a connection Postgres
    # dropped fails its statement with a 503 that makes SQLAlchemy renew the whole pool
    # (tests/test_postgres_cut.py), as the dispatcher's
    engine = partial(
        db.create_engine, pool_size=settings.db_pool_size, max_overflow=0, pre_ping=False
    )
    return service_app(
        service="call-log",
        version=VERSION,
        route_handlers=HANDLERS,
        lifespan=[service_lifespan("call-log", settings, start, engine=engine)],
        registry=registry_for(lambda: held.now),
        readiness=readiness,
    )
