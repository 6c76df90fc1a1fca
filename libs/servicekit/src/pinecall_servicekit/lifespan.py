"""A service's lifespan: the one way an HTTP service opens its connections and closes them
(``shared/CONVENTIONS.md`` habit 4; issue 15, item 6).

:func:`service_lifespan` is the Litestar lifespan of every service app. In order, it

1. configures telemetry for the service (``Settings.log_level``, ``log_format``);
2. opens Postgres, when the service has tables (an engine on ``Settings.database_url``), then NATS;
3. awaits the service's ``start(app, opened)``, which builds what the service runs on them and
   says through :class:`Opened` what is to be closed (a service started, a ``nats.micro``
   service, an HTTP client, a loop);
4. holds until the app stops (SIGTERM's drain, a test's exit), then closes everything in the
   reverse order of its opening: what ``start`` opened, last first; NATS, drained; Postgres.

A ``start`` that fails half-way closes what it had opened, and the app does not start. What a
lifespan holds is read from outside it (readiness, a metrics collector) through a :class:`Held`,
None before it starts and once it stops.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import Any, Generic, Protocol, TypeVar

from litestar import Litestar
from sqlalchemy.ext.asyncio import AsyncEngine

from pinecall_servicekit import loopwatch
from pinecall_servicekit.bus import Bus
from pinecall_servicekit.keys import KeyRing
from pinecall_servicekit.settings import Settings
from pinecall_servicekit.telemetry import configure_telemetry

T = TypeVar("T")
Lifespan = Callable[[Litestar], AbstractAsyncContextManager[None]]


class Startable(Protocol):
    """A service object with a start and a stop (the roster's, call-log's, the dispatcher's)."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


S = TypeVar("S", bound=Startable)


class Held(Generic[T]):
    """What a lifespan holds while it runs (:meth:`Opened.hold`): ``now`` is None before it
    starts and once it stops."""

    def __init__(self) -> None:
        self.now: T | None = None


class Opened:
    """The connections a lifespan opened, and the list of what it closes when it ends.

    Each method that opens or starts something also puts its closing on the list, so the order
    of the calls in ``start`` is the reverse of the order of closing.
    """

    def __init__(self, bus: Bus, engine: AsyncEngine | None, stack: AsyncExitStack) -> None:
        self.bus = bus
        self._engine = engine
        self._stack = stack

    @property
    def engine(self) -> AsyncEngine:
        """Postgres; a ``RuntimeError`` for a lifespan given no ``engine``."""
        if self._engine is None:
            raise RuntimeError("this lifespan opened no database: give service_lifespan engine=")
        return self._engine

    def keyring(self, *, cache_s: float) -> KeyRing:
        """A key ring on this lifespan's Postgres and NATS, remembering a key ``cache_s`` seconds
        (the service starts it)."""
        return KeyRing(self.engine, self.bus, cache_s=cache_s)

    def on_close(self, close: Callable[[], Awaitable[object]]) -> None:
        """Await ``close()`` when the lifespan ends (a ``nats.micro`` service's ``stop``)."""
        self._stack.push_async_callback(close)

    async def enter(self, context: AbstractAsyncContextManager[T]) -> T:
        """Enter ``context`` (an HTTP client) now and exit it when the lifespan ends."""
        return await self._stack.enter_async_context(context)

    async def start(self, service: S) -> S:
        """Start ``service``; stop it when the lifespan ends, even if its start fails half-way
        (a stop undoes what a start did)."""
        self._stack.push_async_callback(service.stop)
        await service.start()
        return service

    def run(self, work: Coroutine[Any, Any, None], *, name: str) -> None:
        """Run ``work`` as a task named ``name``; cancel it and await its end when the lifespan
        ends."""
        task = asyncio.create_task(work, name=name)

        async def cancel() -> None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

        self._stack.push_async_callback(cancel)

    def hold(self, held: Held[T], value: T) -> T:
        """``value`` in ``held`` from now until the lifespan ends; returns ``value``."""
        held.now = value

        def let_go() -> None:
            held.now = None

        self._stack.callback(let_go)
        return value


def service_lifespan(
    service: str,
    settings: Settings,
    start: Callable[[Litestar, Opened], Awaitable[None]],
    *,
    engine: Callable[[str], AsyncEngine] | None = None,
) -> Lifespan:
    """The lifespan of the app of ``service`` (its name in logs, traces and NATS): telemetry,
    Postgres from ``engine(settings.database_url)`` when given, NATS, then ``start``; closed in
    reverse order when the app stops (the module's docstring).

    Raises what opening raised (``BusUnavailable`` for NATS that did not answer), after closing
    what was opened.
    """

    @asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        configure_telemetry(
            service,
            level=settings.log_level,
            fmt=settings.log_format,
            traces_file=settings.traces_file,
        )
        async with AsyncExitStack() as stack:
            await stack.enter_async_context(loopwatch.watching(service))
            database = None
            if engine is not None:
                # SQLAlchemy builds its dialect in Python (40+ ms of CPU, more under load): not
                # on the loop the watcher above times; the engine binds no loop until it connects
                database = await asyncio.to_thread(engine, settings.database_url)
                stack.push_async_callback(database.dispose)
            bus = await Bus.connect(settings.nats_url, settings.nats_namespace, name=service)
            stack.push_async_callback(bus.close)
            await start(app, Opened(bus, database, stack))
            yield

    return lifespan
