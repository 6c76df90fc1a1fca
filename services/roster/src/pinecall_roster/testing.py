"""Test support for the roster and for tests of other services that need one (no fixtures here:
they are in the tests' conftest). Used only by tests."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, cast

import httpx
import msgspec
from litestar import Litestar


class Keys(msgspec.Struct, frozen=True):
    operator: str
    production: str
    sandbox: str
    app: str
    production_id: str


async def make_keys(database_url: str) -> Keys:
    """An operator key, a fleet key per environment and an app key, in the database at
    ``database_url`` (a test's own)."""
    from pinecall_roster.store import Store
    from pinecall_servicekit import db

    engine = db.create_engine(database_url, pool_size=1)
    store = Store(engine)
    try:
        operator = await store.create_key("operator", "test", None)
        production = await store.create_key("fleet", "workers", "production")
        sandbox = await store.create_key("fleet", "workers", "sandbox")
        app = await store.create_key("app", "an app", "production")
    finally:
        await engine.dispose()
    return Keys(operator.secret, production.secret, sandbox.secret, app.secret, production.key.id)


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


class Replica(httpx.AsyncClient):
    """An HTTP client of one in-process roster replica, with the app at hand (``.app``)."""

    app: Litestar


@asynccontextmanager
async def running(app: Litestar) -> AsyncIterator[Replica]:
    """Run ``app``'s lifespan in this event loop and yield a client of it over ASGI.

    Litestar's own test client runs the app in a thread of its own; here the app, its NATS
    callbacks and the test share one loop, so a test can await the app's own change notices.
    The lifespan runs in a task of its own (anyio's cancel scopes must exit in the task that
    entered them, and pytest may tear a fixture down in another).
    """
    started: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    stop = asyncio.Event()

    async def hold() -> None:
        try:
            async with app.lifespan():
                started.set_result(None)
                await stop.wait()
        except BaseException as exc:
            if not started.done():
                started.set_exception(exc)
            raise

    task = asyncio.create_task(hold(), name="replica-lifespan")
    try:
        await started
        transport = httpx.ASGITransport(app=cast(Any, app))  # Litestar's scope types are narrower
        async with Replica(transport=transport, base_url="http://roster.test") as client:
            client.app = app
            yield client
    finally:
        stop.set()
        await task
