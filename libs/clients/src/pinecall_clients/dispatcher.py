"""The dispatcher's client: what an operator's tools read of it over HTTP, with an operator key.

``GET /v1/ops/offers`` (each fleet's rooms in offers, the rooms kept past a minute) and
``GET /v1/ops/calls/{call}/journal`` (a call's offers and why), as ``up`` reads them for its table
and its report. Nothing is retried: a read that gets no answer is read again at the next tick, or
said as a problem of the report. Every failure is a
:class:`~pinecall_clients.errors.DispatcherError` (``DispatcherUnavailable``: nothing answered in
time, a 5xx, or an answer that is no reply; ``DispatcherRefused``: a 4xx, with its problem
detail). A web visitor's token (``POST /v1/tokens``) is the tenant's page's to ask, not ours.

With the service key, the chat service asks ``POST /v1/written-calls`` (:meth:`admit_written`)
before it opens a written call: one request, not retried (the visitor dials again).
"""

from __future__ import annotations

from typing import TypeVar

import httpx

from pinecall_clients.answers import read_answer
from pinecall_clients.errors import DispatcherRefused, DispatcherUnavailable
from pinecall_contracts.base import encode
from pinecall_contracts.dispatch import (
    Journal,
    OffersSnapshot,
    WrittenAdmission,
    WrittenAdmitted,
)

R = TypeVar("R", Journal, OffersSnapshot)


class DispatcherClient:
    """The dispatcher at ``base_url`` with one ``key`` (``transport``: a test's in-process
    replica instead of the network); each read waits ``timeout_s`` at most. Close with
    :meth:`aclose` (or ``async with``)."""

    def __init__(
        self,
        base_url: str,
        key: str,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        timeout_s: float = 5.0,
    ) -> None:
        self.http = httpx.AsyncClient(
            base_url=base_url,
            transport=transport,
            headers={"Authorization": f"Bearer {key}"},
            timeout=timeout_s,
        )

    async def __aenter__(self) -> DispatcherClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self.http.aclose()

    async def offers(self) -> OffersSnapshot:
        """Every fleet's rooms in offers and refusals in ten minutes; the rooms kept."""
        return await self._get("/v1/ops/offers", OffersSnapshot)

    async def journal(self, call: str) -> Journal:
        """``call``'s offers, oldest first (``DispatcherRefused``, 404, for a call never
        offered)."""
        return await self._get(f"/v1/ops/calls/{call}/journal", Journal)

    async def admit_written(self, admission: WrittenAdmission) -> WrittenAdmitted:
        """Admit a written call (the service key): ``DispatcherRefused`` with the problem's
        ``code`` ``unknown_agent`` (422) or ``too_many_requests`` (429, the org's quota)."""
        path = "/v1/written-calls"
        return await read_answer(
            self.http.post(
                path, content=encode(admission), headers={"content-type": "application/json"}
            ),
            WrittenAdmitted,
            who="the dispatcher",
            path=path,
            unavailable=DispatcherUnavailable,
            refused=DispatcherRefused,
        )

    async def _get(self, path: str, reply: type[R]) -> R:
        return await read_answer(
            self.http.get(path),
            reply,
            who="the dispatcher",
            path=path,
            unavailable=DispatcherUnavailable,
            refused=DispatcherRefused,
        )
