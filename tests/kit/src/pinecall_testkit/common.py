"""What every service's part of the kit does alike: one key of each kind, a key as a request's
header, a replica in the test's event loop on the test's database and NATS. Used only by
tests."""

from __future__ import annotations

import functools
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import TypeVar

import msgspec
from litestar import Litestar

from pinecall_contracts.keys import KeyKind
from pinecall_servicekit import db
from pinecall_servicekit.settings import Settings
from pinecall_servicekit.testing.apps import Replica
from pinecall_servicekit.testing.apps import running as run_app

S = TypeVar("S", bound=Settings)


class Keys(msgspec.Struct, frozen=True, kw_only=True):
    """One key's token of each kind (a fleet and an app key per environment), and the id of the
    production fleet key (what an operator names to revoke it)."""

    operator: str
    production: str
    sandbox: str
    app: str
    app_sandbox: str
    service: str
    production_id: str


async def make_keys(database_url: str) -> Keys:
    """One key of each kind, made by the roster's store in the database at ``database_url`` (a
    test's own), named as the fields are."""
    from pinecall_roster.store import Store

    engine = db.create_engine(database_url, pool_size=1)
    made: dict[str, str] = {}
    wanted: dict[str, tuple[KeyKind, str | None]] = {
        "operator": ("operator", None),
        "production": ("fleet", "production"),
        "sandbox": ("fleet", "sandbox"),
        "app": ("app", "production"),
        "app_sandbox": ("app", "sandbox"),
        "service": ("service", None),
    }
    try:
        store = Store(engine)
        for name, (kind, environment) in wanted.items():
            created = await store.create_key(kind, name, environment)
            made[name] = created.secret
            if name == "production":
                made["production_id"] = created.key.id
    finally:
        await engine.dispose()
    return Keys(**made)


def bearer(key: str) -> dict[str, str]:
    """``key`` as the ``Authorization`` header of a request."""
    return {"Authorization": f"Bearer {key}"}


def running_at(url: str) -> Callable[[Litestar], AbstractAsyncContextManager[Replica]]:
    """``running(app)`` of a service reached at ``url``: the app's lifespan run in this event
    loop, reached over ASGI (see servicekit's testing)."""
    return functools.partial(run_app, base_url=url)


def replica_of(
    create_app: Callable[[S], Litestar],
    settings: type[S],
    base_url: str,
    database_url: str,
    nats_url: str,
    nats_namespace: str,
    **overrides: object,
) -> AbstractAsyncContextManager[Replica]:
    """The app ``create_app`` makes of ``settings`` on the test's database and NATS (text logs;
    ``overrides``: its other settings), its lifespan run in this event loop and reached over ASGI
    at ``base_url`` (see servicekit's testing)."""
    made = settings.from_env(
        {},
        database_url=database_url,
        nats_url=nats_url,
        nats_namespace=nats_namespace,
        log_format="text",
        **overrides,
    )
    return run_app(create_app(made), base_url=base_url)
