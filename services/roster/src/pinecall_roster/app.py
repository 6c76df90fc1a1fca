"""``create_app``: the roster's Litestar app; Granian serves it as a factory."""

from __future__ import annotations

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
from pinecall_servicekit.http import service_app
from pinecall_servicekit.lifespan import Held, Opened, service_lifespan

HANDLERS = api.ROUTES
"""Every route this service serves; the chart's ingress is tested against it
(``tests/deploy/test_numbers.py``)."""


def create_app(settings: RosterSettings | None = None) -> Litestar:
    """The roster app; connections open in its lifespan and close when it ends."""
    settings = settings or RosterSettings.from_env()
    held: Held[RosterService] = Held()

    async def start(app: Litestar, opened: Opened) -> None:
        bus = opened.bus
        kv = await bus.key_value(bus.subjects.cordons_bucket)
        service = RosterService(
            settings,
            bus,
            Store(opened.engine),
            opened.keyring(cache_s=settings.key_cache_s),
            CordonBook(kv, bus.subjects),
        )
        await opened.start(service)
        opened.on_close((await start_ops(service)).stop)
        app.state.roster = opened.hold(held, service)

    async def readiness(app_state: State) -> dict[str, bool]:
        service = held.now
        return {
            "postgres": bool(service and await service.store.answers()),
            "nats": bool(service and service.bus.connected),
            "cordons": bool(service and service.cordons.loaded.is_set()),
        }

    return service_app(
        service="roster",
        version=VERSION,
        route_handlers=HANDLERS,
        lifespan=[service_lifespan("roster", settings, start, engine=db.create_engine)],
        registry=registry_for(lambda: held.now),
        readiness=readiness,
    )
