"""The HTTP client every service client of this package is made with: httpx's API on aiohttp's
connection pool (``httpx_aiohttp.AiohttpTransport``).

httpx's own pool (httpcore) costs the asker 0.71–1.10 ms of CPU a request to a local server on
this machine, the same requests through aiohttp's pool 0.26–0.51, aiohttp alone 0.07–0.20
(``bench/http_client.py``, issue 20): the load's drivers, which are the workers' writer, spent
more than half their samples in httpcore's pool, and cost a quarter less on aiohttp's. The
retries, the errors and the tests' in-process transports stay httpx's: ``transport`` given
(``httpx.ASGITransport``, ``httpx.MockTransport``) is used as it is. aiohttp's errors reach the
caller as the httpx errors that name them (a refused connection ``httpx.ConnectError``, a lost one
``httpx.RemoteProtocolError``, an answer that is not HTTP, which httpx-aiohttp 0.2 lets through
unmapped, ``httpx.RemoteProtocolError``: each a ``httpx.TransportError``), so what retries one
retries the other (``libs/clients/tests/test_http.py``). ``HTTP_PROXY`` and its kin are not
honoured: the clients speak to the runtime's own services.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager

import aiohttp
import httpx
from httpx_aiohttp import AiohttpTransport

from pinecall_clients.tls import TLS

LIMITS = httpx.Limits(max_connections=100, max_keepalive_connections=20)
"""At most 100 connections to one server (aiohttp's ``limit``, which also bounds the idle ones:
aiohttp has no ``max_keepalive_connections``), idle ones kept 5 s."""


def _precise(exc: aiohttp.ClientError) -> httpx.TransportError:
    """``exc`` as the httpx error that names it. httpx-aiohttp 0.2 maps every lost or refused
    connection, a name that does not resolve included, to ``ConnectTimeout``, which is what the
    retries' log would say; and its parser's errors not at all."""
    said = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return httpx.ConnectTimeout(said)
    if isinstance(exc, aiohttp.ServerTimeoutError):
        return httpx.ReadTimeout(said)
    if isinstance(exc, aiohttp.ClientConnectorError):  # refused, no such name, TLS refused
        return httpx.ConnectError(said)
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return httpx.RemoteProtocolError(said)
    if isinstance(exc, aiohttp.ClientPayloadError):
        return httpx.ReadError(said)
    if isinstance(exc, aiohttp.ClientResponseError):  # its parser's: the answer is not HTTP
        return httpx.RemoteProtocolError(f"not an HTTP answer: {said}")
    return httpx.NetworkError(said)


@contextmanager
def _mapped() -> Iterator[None]:
    """aiohttp's errors, raised or already mapped by httpx-aiohttp, as :func:`_precise` names."""
    try:
        yield
    except httpx.TransportError as exc:
        if isinstance(exc.__cause__, aiohttp.ClientError):
            raise _precise(exc.__cause__) from exc.__cause__
        raise
    except aiohttp.ClientError as exc:
        raise _precise(exc) from exc


class _Body(httpx.AsyncByteStream):
    """An answer's body read through :func:`_mapped`."""

    def __init__(self, stream: httpx.AsyncByteStream) -> None:
        self._stream = stream

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with _mapped():
            async for chunk in self._stream:
                yield chunk

    async def aclose(self) -> None:
        with _mapped():
            await self._stream.aclose()


class _Transport(AiohttpTransport):
    """httpx-aiohttp's transport with every aiohttp error named as httpx's (:func:`_mapped`)."""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        with _mapped():
            response = await super().handle_async_request(request)
        assert isinstance(response.stream, httpx.AsyncByteStream)
        response.stream = _Body(response.stream)
        return response


def client(
    base_url: str,
    *,
    headers: dict[str, str],
    timeout_s: float | None = 5.0,
    transport: httpx.AsyncBaseTransport | None = None,
    limits: httpx.Limits = LIMITS,
    uds: str | None = None,
) -> httpx.AsyncClient:
    """An ``httpx.AsyncClient`` on ``base_url`` sending ``headers`` with every request, each
    request given ``timeout_s`` seconds (None: no limit), through ``transport`` or, by default,
    aiohttp's pool with the process's one TLS context (:data:`pinecall_clients.tls.TLS`). The
    pool is made on the first request, on that request's event loop; close the client with
    ``aclose``. ``uds``: the path of a Unix socket every request goes to (``base_url``'s host is
    then only its ``Host`` header)."""
    return httpx.AsyncClient(
        base_url=base_url,
        transport=transport or _Transport(verify=TLS, limits=limits, uds=uds),
        headers=headers,
        timeout=timeout_s,
    )
