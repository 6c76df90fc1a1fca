"""A TCP relay in front of a replica's port: what a load balancer is to an app's socket, with a
switch to cut every connection through it and to hold new ones until released (the network
between an app and call-log failing on command, never a patch). Used only by tests."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

UNAVAILABLE = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain\r\ncontent-length: 20\r\n"
    b"connection: close\r\n\r\nno upstream answers\n"
)
"""What a load balancer answers a request while its upstream refuses connections."""


def _address(upstream: str) -> tuple[str, int]:
    host, _, port = upstream.split("://")[-1].partition(":")
    return host, int(port)


class Relay:
    """Bytes from ``url`` to the replica at ``upstream`` (``ws://host:port`` or
    ``http://host:port``), both ways. A connection the upstream refuses (its replica is dead)
    is answered :data:`UNAVAILABLE`, as a load balancer answers with no healthy upstream."""

    def __init__(self, upstream: str) -> None:
        self._upstream = _address(upstream)
        self._open = asyncio.Event()
        self._open.set()
        self._pairs: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self.connections = 0
        """Connections relayed to the replica so far."""
        self.url = ""
        """``ws://127.0.0.1:<port>``: where the app dials (:attr:`http_url` for a page)."""

    @property
    def http_url(self) -> str:
        """``http://127.0.0.1:<port>``: the relay as a page's ``EventSource`` reaches it."""
        return self.url.replace("ws://", "http://", 1)

    def cut(self) -> None:
        """Every connection through the relay drops at once (no close frame, both ends)."""
        for downstream, upstream in list(self._pairs):
            downstream.transport.abort()
            upstream.transport.abort()
        self._pairs.clear()

    def point(self, upstream: str) -> None:
        """New connections go to ``upstream`` from now on (what a load balancer does once it
        sees a replica gone); those open stay where they are."""
        self._upstream = _address(upstream)

    def hold(self) -> None:
        """New connections are accepted and wait, relayed only once :meth:`release`."""
        self._open.clear()

    def release(self) -> None:
        self._open.set()

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await self._open.wait()
            up_reader, up_writer = await asyncio.open_connection(*self._upstream)
        except OSError:
            with contextlib.suppress(OSError):
                await reader.read(65536)  # the request, or its start: then the answer
                writer.write(UNAVAILABLE)
                await writer.drain()
            writer.close()
            return
        except asyncio.CancelledError:
            # the relay ends with this connection still held or dialling: closed here, else
            # Python 3.11 leaves it open for the garbage collector (a later test's warning)
            writer.transport.abort()
            raise
        self.connections += 1
        pair = (writer, up_writer)
        self._pairs.add(pair)
        try:
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        finally:
            self._pairs.discard(pair)
            for each in pair:
                each.transport.abort()

    def _accepted(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.create_task(self._relay(reader, writer), name="relay")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    @classmethod
    @asynccontextmanager
    async def before(cls, upstream: str) -> AsyncIterator[Relay]:
        """A relay to ``upstream`` listening on a free loopback port until the block ends."""
        relay = cls(upstream)
        server = await asyncio.start_server(relay._accepted, "127.0.0.1", 0)
        relay.url = f"ws://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        try:
            yield relay
        finally:
            server.close()
            relay.release()
            relay.cut()
            for task in list(relay._tasks):
                task.cancel()
            await asyncio.gather(*relay._tasks, return_exceptions=True)
            await server.wait_closed()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    with contextlib.suppress(OSError, RuntimeError):  # the other end is gone already
        writer.write_eof()
