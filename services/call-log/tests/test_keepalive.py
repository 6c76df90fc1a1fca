"""The idle keep-alive a served HTTP service promises (seed 000, "Three planes": 620 s, past the
load balancer's 600 s, so the balancer closes an idle connection, never the service under it):
``call-log serve`` with ``PINECALL_KEEPALIVE_S`` scaled down to 3 s, the same setting path
(``Settings.keepalive_s`` → ``serve_http`` → Granian's HTTP/1 ``header_read_timeout``), one raw
HTTP/1.1 connection (issue 14 item 14)."""

from __future__ import annotations

import asyncio

import h11

from pinecall_testkit.call_log import replica_env, served

KEEP_S = 3
"""The scaled-down keep-alive; Granian's own default (30 s) is far past every bound below."""


class Connection:
    """One HTTP/1.1 connection kept open across requests (h11 on asyncio streams)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.h11 = h11.Connection(our_role=h11.CLIENT)

    async def get(self, path: str) -> int:
        """``GET path`` on this connection; the response's status (its body read to the end)."""
        if self.h11.our_state is h11.DONE:
            self.h11.start_next_cycle()
        request = h11.Request(method="GET", target=path, headers=[("Host", "call-log")])
        self.writer.write(self.h11.send(request) + self.h11.send(h11.EndOfMessage()))
        await self.writer.drain()
        status = 0
        while True:
            event = self.h11.next_event()
            if event is h11.NEED_DATA:
                self.h11.receive_data(await self.reader.read(65536))
            elif isinstance(event, h11.Response):
                status = event.status_code
            elif isinstance(event, h11.EndOfMessage):
                return status
            elif isinstance(event, h11.ConnectionClosed):
                raise ConnectionError(f"GET {path}: the server closed the connection")


async def test_an_idle_keep_alive_connection_is_kept_its_time_and_closed_after(
    database_url: str, nats_url: str, nats_namespace: str
) -> None:
    env = replica_env(database_url, nats_url, nats_namespace) | {
        "PINECALL_KEEPALIVE_S": str(KEEP_S)
    }
    async with served(env, 1) as (replica,):
        host, port = replica.url.removeprefix("http://").split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        try:
            connection = Connection(reader, writer)
            assert await connection.get("/readyz") == 200
            await asyncio.sleep(KEEP_S - 1)  # idle on purpose: the behaviour under test
            assert await connection.get("/readyz") == 200  # the same connection still answers
            async with asyncio.timeout(KEEP_S + 20):  # bounded: closed well before Granian's 30 s
                assert await reader.read(1) == b""  # the server closed it: EOF, no reply
        finally:
            writer.close()
