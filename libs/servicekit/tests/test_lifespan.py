"""A service's lifespan opens Postgres and NATS, runs the service's start on them, and closes it
all in reverse order, also after a start that failed half-way (``pinecall_servicekit.lifespan``).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import sqlalchemy as sa
from litestar import Litestar
from sqlalchemy.ext.asyncio import AsyncEngine

from pinecall_servicekit import db
from pinecall_servicekit.bus import Bus
from pinecall_servicekit.lifespan import Held, Opened, service_lifespan
from pinecall_servicekit.settings import Settings


class Service:
    """A service that writes down its start and stop."""

    def __init__(self, said: list[str], name: str) -> None:
        self.said, self.name = said, name

    async def start(self) -> None:
        self.said.append(f"start {self.name}")

    async def stop(self) -> None:
        self.said.append(f"stop {self.name}")


@pytest.fixture
def settings(database_url: str, nats_url: str, nats_namespace: str) -> Settings:
    return Settings(database_url=database_url, nats_url=nats_url, nats_namespace=nats_namespace)


async def test_what_starts_is_closed_in_reverse_and_held_only_while_it_runs(
    settings: Settings,
) -> None:
    said: list[str] = []
    held: Held[Service] = Held()
    opened_on: dict[str, Any] = {}
    looping = asyncio.Event()

    async def loop() -> None:
        looping.set()
        try:
            await asyncio.Event().wait()
        finally:
            said.append("loop cancelled")

    async def closing(what: str) -> None:
        said.append(f"close {what}")

    async def start(app: Litestar, opened: Opened) -> None:
        opened_on.update(bus=opened.bus, engine=opened.engine)
        async with opened.engine.connect() as conn:  # Postgres answers
            assert (await conn.execute(sa.text("select 1"))).scalar() == 1
        opened.on_close(lambda: closing("first"))
        service = await opened.start(Service(said, "service"))
        opened.run(loop(), name="loop")
        app.state.service = opened.hold(held, service)

    app = Litestar(lifespan=[service_lifespan("test", settings, start, engine=db.create_engine)])
    assert held.now is None
    async with app.lifespan():
        await looping.wait()
        assert held.now is app.state.service
        bus: Bus = opened_on["bus"]
        assert bus.connected
    assert held.now is None
    assert said == ["start service", "loop cancelled", "stop service", "close first"]
    assert not bus.connected  # NATS drained and closed
    engine: AsyncEngine = opened_on["engine"]
    assert engine.pool.checkedout() == 0


async def test_a_start_that_fails_half_way_closes_what_it_opened(settings: Settings) -> None:
    said: list[str] = []
    opened_on: dict[str, Bus] = {}

    async def start(app: Litestar, opened: Opened) -> None:
        opened_on["bus"] = opened.bus
        await opened.start(Service(said, "service"))
        raise RuntimeError("the ops service did not start")

    with pytest.raises(RuntimeError, match="did not start"):
        async with service_lifespan("test", settings, start)(Litestar()):
            pytest.fail("the app started")
    assert said == ["start service", "stop service"]
    assert not opened_on["bus"].connected


async def test_a_lifespan_given_no_engine_has_no_database(settings: Settings) -> None:
    async def start(app: Litestar, opened: Opened) -> None:
        opened.engine  # noqa: B018  # the property raises

    with pytest.raises(RuntimeError, match="opened no database"):
        async with service_lifespan("test", settings, start)(Litestar()):
            pytest.fail("the app started")
