"""The clients on aiohttp's pool (``pinecall_clients.http``) against a real server on a real
socket: what aiohttp raises reaches the retry rule as httpx's errors (a connection the server
drops is silence, retried unchanged; a closed port is ``CallLogUnavailable`` once the retries
run out; an answer that is not HTTP is silence too), and the pool's connections are kept between
requests."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator

import httpx
import pytest
from aiohttp import web

from pinecall_clients.calllog import Backoff, CallLogClient
from pinecall_clients.errors import CallLogUnavailable
from pinecall_contracts.calls import CallEnd, CallRecord

QUICK = Backoff(first=0.001, most=0.002, jitter=0.0)
RECORD = (
    b'{"call": "c1", "agent": "a", "org": "o", "environment": "production", "room": "r",'
    b' "worker": "w", "state": "sealed", "written": 0, "last_seq": 3,'
    b' "opened_at": "2026-11-30T06:49:19+00:00"}'
)


class Server:
    """An aiohttp server that drops the connection of the first ``drops`` requests unanswered
    and answers the rest with a sealed record; it keeps each body and each peer port."""

    def __init__(self, drops: int) -> None:
        self.drops = drops
        self.bodies: list[bytes] = []
        self.ports: list[int] = []

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.bodies.append(await request.read())
        peer = request.transport.get_extra_info("peername") if request.transport else None
        self.ports.append(peer[1] if peer else -1)
        if self.drops > 0:
            self.drops -= 1
            assert request.transport is not None
            request.transport.close()  # nothing answered: the connection is lost
            raise web.HTTPInternalServerError  # never reaches the client
        return web.Response(body=RECORD, content_type="application/json")


@pytest.fixture
async def served() -> AsyncIterator[tuple[Server, str]]:
    server = Server(drops=2)
    app = web.Application()
    app.router.add_post("/v1/calls/c1/seal", server.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield server, f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


async def test_a_dropped_connection_is_retried_unchanged_and_the_connection_is_kept(
    served: tuple[Server, str],
) -> None:
    server, url = served
    async with CallLogClient(url, "k", backoff=QUICK) as client:
        for _ in range(2):  # the first seal meets two drops; the second its kept connection
            record = await client.request(
                "/v1/calls/c1/seal", CallEnd(outcome="completed"), CallRecord, within_s=5.0
            )
            assert record.state == "sealed"
    assert len(server.bodies) == 4
    assert len(set(server.bodies)) == 1
    assert server.ports[2] == server.ports[3]  # answered on one connection, kept by the pool
    assert len(set(server.ports)) == 3  # each dropped connection was made anew


async def test_a_closed_port_is_unavailable_once_the_retries_run_out() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, never listening: connections are refused
        async with CallLogClient(f"http://127.0.0.1:{port}", "k", backoff=QUICK) as client:
            with pytest.raises(CallLogUnavailable, match="nothing answered") as raised:
                await client.request(
                    "/v1/calls/c1/seal", CallEnd(outcome="completed"), CallRecord, within_s=0.2
                )
    # named as what it is (httpx-aiohttp alone says ConnectTimeout), in the retries' log too
    assert isinstance(raised.value.__cause__, httpx.ConnectError)


async def test_an_answer_that_is_not_http_is_retried_then_unavailable() -> None:
    """aiohttp's parser refuses it with a ``ClientResponseError`` that httpx-aiohttp 0.2 lets
    through unmapped; it must reach the retry rule as httpx's ``RemoteProtocolError``."""
    tries = 0

    async def garbage(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal tries
        await reader.readuntil(b"\r\n\r\n")
        tries += 1
        writer.write(b"NOT HTTP AT ALL\r\n\r\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(garbage, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with CallLogClient(f"http://127.0.0.1:{port}", "k", backoff=QUICK) as client:
            with pytest.raises(CallLogUnavailable, match="not an HTTP answer") as raised:
                await client.request(
                    "/v1/calls/c1/seal", CallEnd(outcome="completed"), CallRecord, within_s=0.3
                )
    finally:
        server.close()
        await server.wait_closed()
    assert isinstance(raised.value.__cause__, httpx.RemoteProtocolError)
    assert tries > 1  # retried as silence is
