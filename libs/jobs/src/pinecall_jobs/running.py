"""How the worker and the overflow run their ``AgentServer``: until told to stop, then drained.

    stop = asyncio.Event()                           # SIGTERM sets it, as does a cordon
    code = await serve_until_stopped(server, stop, drain, alongside={"heartbeat": beat()})

SIGTERM sets ``stop`` (seed 002, "A deploy never cuts a call": a pod told to go drains). When
``stop`` is set, ``drain()`` runs while the server still holds its jobs; then the tasks
``alongside`` are cancelled and the server is closed (:func:`pinecall_jobs.server.close_server`),
whatever happened. A server that ends by itself (LiveKit refused it for good) raises its error, or
gives None: the caller's exit code says it failed.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any, TypeVar

from livekit.agents import AgentServer

from pinecall_jobs import loops
from pinecall_jobs.server import close_server

R = TypeVar("R")


async def serve_until_stopped(
    server: AgentServer,
    stop: asyncio.Event,
    drain: Callable[[], Awaitable[R]],
    *,
    alongside: Mapping[str, Coroutine[Any, Any, None]] | None = None,
) -> R | None:
    """Run ``server`` (production mode) and the coroutines ``alongside`` (named tasks) until
    ``stop`` is set or SIGTERM comes; then ``drain()``'s result. None if the server ended by
    itself without an error (its error, if any, is raised)."""
    loop = asyncio.get_running_loop()
    with contextlib.suppress(NotImplementedError, RuntimeError):  # not the main thread: no signal
        loop.add_signal_handler(signal.SIGTERM, stop.set)
    with loops.watching("main", spans=False):
        served = asyncio.create_task(server.run(devmode=False), name="agent-server")
        tasks = [asyncio.create_task(c, name=name) for name, c in (alongside or {}).items()]
        stopping = asyncio.create_task(stop.wait())
        try:
            done, _ = await asyncio.wait({served, stopping}, return_when=asyncio.FIRST_COMPLETED)
            if served in done:
                served.result()
                return None
            return await drain()
        finally:
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(signal.SIGTERM)
            stopping.cancel()
            for task in tasks:
                task.cancel()
            await close_server(server)
            served.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await served
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
