"""Stopping the lab's aiohttp servers without leaving a socket open behind them.

aiohttp's ``AppRunner.cleanup`` closes each connection gracefully, and asyncio's graceful close of a
transport waits until what it buffered is sent: to a peer that stopped reading (a worker frozen by
SIGSTOP, ``loadlab/tests/test_death.py``, whose room audio filled the socket) that is never, so the
socket stays open until the garbage collector finds it (a ``ResourceWarning`` in whichever test runs
then). :func:`stop` aborts what is still open once the graceful stop is done.
"""

from __future__ import annotations

import asyncio

from aiohttp import web


async def stop(runner: web.AppRunner) -> None:
    """``runner.cleanup()``, then abort each of its connections' transports still open (their
    unsent bytes dropped). Aborting a transport already closed does nothing."""
    server = runner.server
    transports: list[asyncio.BaseTransport] = []
    if server is not None:
        transports = [h.transport for h in server.connections if h.transport is not None]
    await runner.cleanup()
    for transport in transports:
        if isinstance(transport, asyncio.Transport):
            transport.abort()
