"""A service's app run in the test's own event loop, reached in-process over ASGI."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, cast

import httpx
from litestar import Litestar

from pinecall_servicekit import loopwatch


class Replica(httpx.AsyncClient):
    """An HTTP client of one in-process replica, with the app at hand (``.app``) and the
    transport it is reached over (``.transport``: give it to a typed client, ``transport=``)."""

    app: Litestar
    transport: httpx.AsyncBaseTransport


@asynccontextmanager
async def running(app: Litestar, base_url: str = "http://service.test") -> AsyncIterator[Replica]:
    """Run ``app``'s lifespan in this event loop and yield a client of it over ASGI.

    Litestar's own test client runs the app in a thread of its own; here the app, its NATS
    callbacks and the test share one loop, so a test can await the app's own change notices.
    The lifespan runs in a task of its own (anyio's cancel scopes must exit in the task that
    entered them, and pytest may tear a fixture down in another). It watches no loop
    (:data:`pinecall_servicekit.loopwatch.SHARED`): the loop is the test's.
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

    shared = loopwatch.SHARED.set(True)  # the lifespan's task copies it: the loop is the test's
    try:
        task = asyncio.create_task(hold(), name="replica-lifespan")
    finally:
        loopwatch.SHARED.reset(shared)
    try:
        await started
        transport = httpx.ASGITransport(app=cast(Any, app))
        async with Replica(transport=transport, base_url=base_url) as client:
            client.app = app
            client.transport = transport
            yield client
    finally:
        stop.set()
        await task
