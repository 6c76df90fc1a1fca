"""Every client of the process shares one TLS context (``pinecall_clients.tls``): a client made
on a job's event loop parses no CA bundle (issue 20)."""

from __future__ import annotations

import httpx
from httpx_aiohttp import AiohttpTransport

from pinecall_clients.calllog import CallLogClient
from pinecall_clients.dispatcher import DispatcherClient
from pinecall_clients.roster import RosterClient
from pinecall_clients.tls import TLS


def _context(http: httpx.AsyncClient) -> object:
    # the transport holds the context its connections wrap sockets with: aiohttp's pool
    # (httpx_aiohttp's AiohttpTransport.ssl_context, given to its TCPConnector) for ours,
    # httpcore's (AsyncConnectionPool._ssl_context) for a client left to itself, which makes its own
    transport = http._transport  # type: ignore[attr-defined]
    if isinstance(transport, AiohttpTransport):
        return transport.ssl_context
    return transport._pool._ssl_context


async def test_the_clients_share_the_process_tls_context() -> None:
    url = "https://127.0.0.1:9"
    clients = [
        CallLogClient(url, "k").http,
        CallLogClient(url, "k").http,
        DispatcherClient(url, "k").http,
    ]
    roster = RosterClient("k", base_url=url)
    assert roster.http is not None
    clients.append(roster.http)
    try:
        for http in clients:
            assert _context(http) is TLS
        unshared = httpx.AsyncClient()
        assert _context(unshared) is not TLS
        await unshared.aclose()
    finally:
        for http in clients:
            await http.aclose()
