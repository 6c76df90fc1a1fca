"""The dispatcher's client: what an operator's tools read of it over HTTP, with an operator key.

``GET /v1/ops/offers`` (each fleet's rooms in offers, the rooms kept past a minute) and
``GET /v1/ops/calls/{call}/journal`` (a call's offers and why), as ``up`` reads them for its table
and its report. Nothing is retried: a read that gets no answer is read again at the next tick, or
said as a problem of the report. Every failure is a
:class:`~pinecall_clients.errors.DispatcherError` (``DispatcherUnavailable``: nothing answered in
time, a 5xx, or an answer that is no reply; ``DispatcherRefused``: a 4xx, with its problem
detail). A web visitor's token (``POST /v1/tokens``) is the tenant's page's to ask, not ours.

An org's phone numbers (issue 18: ``PUT/GET/DELETE /v1/phone-numbers``) with an operator key
naming the environment, or an app key of its own: :meth:`put_number`, :meth:`numbers`,
:meth:`number`, :meth:`remove_number`, each one request (the operator asks again).

With the service key, the chat service asks ``POST /v1/written-calls`` (:meth:`admit_written`)
before it opens a written call: one request, not retried (the visitor dials again).
"""

from __future__ import annotations

from typing import TypeVar

import httpx

from pinecall_clients import http
from pinecall_clients.answers import read_answer
from pinecall_clients.errors import DispatcherRefused, DispatcherUnavailable
from pinecall_contracts.base import encode
from pinecall_contracts.dispatch import (
    Journal,
    OffersSnapshot,
    WrittenAdmission,
    WrittenAdmitted,
)
from pinecall_contracts.phones import PhoneNumber, PhoneNumberList, PhoneNumberPut

R = TypeVar("R", Journal, OffersSnapshot)
N = TypeVar("N", PhoneNumber, PhoneNumberList)


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
        self.http = http.client(
            base_url,
            transport=transport,
            headers={"Authorization": f"Bearer {key}"},
            timeout_s=timeout_s,
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

    # -- phone numbers ----------------------------------------------------------------------

    @staticmethod
    def _scope(org: str, environment: str | None) -> dict[str, str]:
        return {"org": org} | ({"environment": environment} if environment else {})

    async def put_number(
        self, number: str, agent: str, *, org: str, environment: str | None = None
    ) -> PhoneNumber:
        """Tie ``number`` to ``org``'s ``agent`` (its trunk and rule made on LiveKit);
        ``DispatcherRefused`` 409 ``number_taken``, 422 ``invalid_number`` / ``unknown_agent``."""
        return await self._number(
            "PUT",
            f"/v1/phone-numbers/{number}",
            PhoneNumber,
            self._scope(org, environment),
            encode(PhoneNumberPut(agent=agent)),
        )

    async def numbers(self, *, org: str, environment: str | None = None) -> PhoneNumberList:
        """``org``'s phone numbers in the environment."""
        path = "/v1/phone-numbers"
        return await self._number("GET", path, PhoneNumberList, self._scope(org, environment))

    async def number(self, number: str, *, org: str, environment: str | None = None) -> PhoneNumber:
        """One of ``org``'s numbers; ``DispatcherRefused`` 404 for one it does not hold."""
        path = f"/v1/phone-numbers/{number}"
        return await self._number("GET", path, PhoneNumber, self._scope(org, environment))

    async def remove_number(
        self, number: str, *, org: str, environment: str | None = None
    ) -> PhoneNumber:
        """Remove one of ``org``'s numbers (its trunk and rule from LiveKit); as it was."""
        path = f"/v1/phone-numbers/{number}"
        return await self._number("DELETE", path, PhoneNumber, self._scope(org, environment))

    async def _number(
        self,
        method: str,
        path: str,
        reply: type[N],
        params: dict[str, str],
        body: bytes | None = None,
    ) -> N:
        headers = {"content-type": "application/json"} if body is not None else {}
        return await read_answer(
            self.http.request(method, path, params=params, content=body, headers=headers),
            reply,
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
