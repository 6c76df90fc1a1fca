"""The HTTP client every service client of this package is made with: httpx's API on aiohttp's
connection pool (``httpx_aiohttp.AiohttpTransport``).

httpx's own pool (httpcore) costs the asker 0.71–1.10 ms of CPU a request to a local server on
this machine, the same requests through aiohttp's pool 0.26–0.51, aiohttp alone 0.07–0.20
(``bench/http_client.py``, issue 20): the load's drivers, which are the workers' writer, spent
more than half their samples in httpcore's pool, and cost a quarter less on aiohttp's. The
retries, the errors and the tests' in-process transports stay httpx's: ``transport`` given
(``httpx.ASGITransport``, ``httpx.MockTransport``) is used as it is. aiohttp's errors reach the
caller as httpx's (a refused or lost connection a ``httpx.TransportError``), so what retries one
retries the other (``libs/clients/tests/test_http.py``).
"""

from __future__ import annotations

import httpx
from httpx_aiohttp import AiohttpTransport

from pinecall_clients.tls import TLS

LIMITS = httpx.Limits(max_connections=100, max_keepalive_connections=20)
"""At most 100 connections to one server (aiohttp's ``limit``), idle ones kept 5 s."""


def client(
    base_url: str,
    *,
    headers: dict[str, str],
    timeout_s: float | None = 5.0,
    transport: httpx.AsyncBaseTransport | None = None,
    limits: httpx.Limits = LIMITS,
) -> httpx.AsyncClient:
    """An ``httpx.AsyncClient`` on ``base_url`` sending ``headers`` with every request, each
    request given ``timeout_s`` seconds (None: no limit), through ``transport`` or, by default,
    aiohttp's pool with the process's one TLS context (:data:`pinecall_clients.tls.TLS`). The
    pool is made on the first request, on that request's event loop; close the client with
    ``aclose``."""
    return httpx.AsyncClient(
        base_url=base_url,
        transport=transport or AiohttpTransport(verify=TLS, limits=limits),
        headers=headers,
        timeout=timeout_s,
    )
