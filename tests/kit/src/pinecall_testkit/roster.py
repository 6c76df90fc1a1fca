"""Test support for the roster and for tests of other services that need one (no fixtures here:
they are in the tests' conftest). Used only by tests."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager

import msgspec
from litestar import Litestar

from pinecall_servicekit.testing.apps import Replica
from pinecall_servicekit.testing.apps import running as run_app


class Keys(msgspec.Struct, frozen=True):
    operator: str
    production: str
    sandbox: str
    app: str
    production_id: str
    service: str


async def make_keys(database_url: str) -> Keys:
    """An operator key, a fleet key per environment, an app key and a service key, in the
    database at ``database_url`` (a test's own)."""
    from pinecall_roster.store import Store
    from pinecall_servicekit import db

    engine = db.create_engine(database_url, pool_size=1)
    store = Store(engine)
    try:
        operator = await store.create_key("operator", "test", None)
        production = await store.create_key("fleet", "workers", "production")
        sandbox = await store.create_key("fleet", "workers", "sandbox")
        app = await store.create_key("app", "an app", "production")
        service = await store.create_key("service", "services", None)
    finally:
        await engine.dispose()
    return Keys(
        operator.secret,
        production.secret,
        sandbox.secret,
        app.secret,
        production.key.id,
        service.secret,
    )


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def heartbeat(
    host: str = "worker-a",
    *,
    fleet: str = "pinecall",
    start: int = 1791067258,
    active: int = 0,
    seats: int = 8,
    **extra: object,
) -> dict[str, object]:
    name = f"{fleet}/{host}.{start}"
    body: dict[str, object] = {
        "fleet": fleet,
        "worker": name,
        "agent_name": name,
        "active": active,
        "max_jobs": seats,
        "load": active / seats,
        "draining": False,
    }
    return body | extra


def running(app: Litestar) -> AbstractAsyncContextManager[Replica]:
    """The app's lifespan run in this event loop, reached over ASGI (see servicekit's testing)."""
    return run_app(app, base_url="http://roster.test")


def replica_on(
    database_url: str, nats_url: str, nats_namespace: str, **overrides: object
) -> AbstractAsyncContextManager[Replica]:
    """A roster replica on the test's database and NATS (``overrides``: its other settings),
    in this event loop, for another service's tests."""
    from pinecall_roster.app import create_app
    from pinecall_roster.settings import RosterSettings

    settings = RosterSettings.from_env(
        {},
        database_url=database_url,
        nats_url=nats_url,
        nats_namespace=nats_namespace,
        log_format="text",
        **overrides,
    )
    return running(create_app(settings))
