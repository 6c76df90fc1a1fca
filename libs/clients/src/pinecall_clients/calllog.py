"""The call log's client (seed 002, "The gateway restarts"); a call's one writer is
:mod:`pinecall_clients.writer`'s, made by :meth:`CallLogClient.writer`.

Retries (``shared/DESIGN.md``, "Numbers the runtime lives by"): a request is sent again, unchanged,
backing off from 0.5 s to 5 s while nothing answers or a 5xx does; a 4xx is an answer and is never
retried. A batch retries until it is answered (or the writer's ``batch_timeout_s``); a tool call
within its own deadline; the end and the seal within 30 s. Retries are stamina's
(``stamina.retry_context``), never a loop of our own; each is named ``call-log <METHOD> <path>``
with its call (``call=``), so the hook that logs a retry
(:func:`pinecall_servicekit.telemetry.said_retry`) says which request of which call failed.

One key per client: a worker's and the overflow's fleet key, or a service's (the dispatcher's and
the reaper's ``PINECALL_SERVICE_KEY``), which names the environment where it acts on an agent;
an app's or an operator's for the agents' definitions (``pinecall-runtime agents``), which the
fleet and service keys may read one at a time (:meth:`CallLogClient.agent`).

Each request is a client span ``call-log <METHOD>`` (its call as ``pinecall.call``) whose W3C
``traceparent`` goes with every try, so call-log's spans are in the asker's trace: a job's writes,
tool calls and seal are in its call's (issue 22, "One trace per call").
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import TypeVar
from urllib.parse import urlencode

import httpx
import stamina
from opentelemetry import propagate, trace

from pinecall_clients import http
from pinecall_clients.errors import (
    AgentUnknown,
    CallLogRefused,
    CallLogUnavailable,
    CallUnknown,
    refused,
)
from pinecall_clients.writer import BatchSender, CallLogWriter
from pinecall_contracts.agents import AgentDefinition, AgentList, AgentVersion
from pinecall_contracts.appsocket import Handed
from pinecall_contracts.base import Contract, decode, encode
from pinecall_contracts.calls import (
    AgentEntry,
    AgentLog,
    BatchWritten,
    CallbackPage,
    CallbackRequest,
    CallCommands,
    CallEnd,
    CallLog,
    CallOpen,
    CallRecord,
    EndCause,
    EntryBatch,
    Outcome,
    Reopened,
    ToolCall,
    ToolResult,
)
from pinecall_contracts.whatsapp import WhatsAppNumber, WhatsAppNumberList, WhatsAppNumberPut
from pinecall_servicekit import calltrace

R = TypeVar("R", bound=Contract)
_tracer = trace.get_tracer(__name__)

SEAL_WITHIN_S = 30.0
"""The end and the seal retry this long (``shared/DESIGN.md``)."""


@dataclass(frozen=True, slots=True)
class Backoff:
    """How long to wait between tries, in seconds: from ``first`` doubling to ``most``."""

    first: float = 0.5
    most: float = 5.0
    jitter: float = 0.25


class _ServerError(Exception):
    """A 5xx: retried like silence."""

    def __init__(self, response: httpx.Response) -> None:
        super().__init__(f"{response.status_code} from {response.request.url}")
        self.status = response.status_code


def _retryable(exc: Exception) -> bool:
    return isinstance(exc, httpx.TransportError | _ServerError)


class CallLogClient:
    """The call log's REST with one key (a fleet key for workers and the overflow).

    ``transport`` is for tests (``httpx.ASGITransport`` of an in-process replica); by default the
    client speaks HTTP to ``base_url`` (through the Unix socket ``uds`` when given: a job
    process's batches to its worker's relay, ``pinecall_worker.relay``). Close with
    :meth:`aclose` (or ``async with``).
    """

    def __init__(
        self,
        base_url: str,
        key: str,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        backoff: Backoff = Backoff(),
        request_timeout_s: float = 5.0,
        limits: httpx.Limits | None = None,
        uds: str | None = None,
    ) -> None:
        self.http = http.client(
            base_url,
            transport=transport,
            uds=uds,
            limits=limits or http.LIMITS,
            headers={"Authorization": f"Bearer {key}", "content-type": "application/json"},
            timeout_s=request_timeout_s,
        )
        self.backoff = backoff
        self.request_timeout_s = request_timeout_s

    async def __aenter__(self) -> CallLogClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self.http.aclose()

    async def request(
        self,
        path: str,
        body: Contract | None,
        reply: type[R],
        *,
        within_s: float | None,
        method: str = "POST",
        call: str | None = None,
        unknown: type[CallLogRefused] = CallUnknown,
        held_s: float = 0.0,
        attempts: int | None = None,
    ) -> R:
        """Send ``body`` unchanged until something other than silence or a 5xx answers.

        ``within_s`` bounds the retries (None: until answered), and ``attempts`` their number
        (None: no bound; 1: one try, for a read whose asker has an answer of its own to fall
        back on); ``call``, the call the request is about, is said with each retry; ``held_s``,
        how long the server may hold the request before it answers (a long poll), is added to
        each try's timeout. Raises ``CallLogUnavailable`` when it runs out, a ``CallLogRefused``
        for a 4xx (``unknown`` for a 404).
        """
        with _tracer.start_as_current_span(
            f"call-log {method}",
            kind=trace.SpanKind.CLIENT,
            attributes={"http.request.method": method, "url.path": path}
            | ({calltrace.CALL: call} if call else {}),
        ):
            return await self._request(
                path, body, reply, within_s, method, call, unknown, held_s, attempts
            )

    async def _request(
        self,
        path: str,
        body: Contract | None,
        reply: type[R],
        within_s: float | None,
        method: str,
        call: str | None,
        unknown: type[CallLogRefused],
        held_s: float,
        attempts: int | None,
    ) -> R:
        content = b"" if body is None else encode(body)
        timeout = max(self.request_timeout_s + held_s, within_s or 0.0)
        response: httpx.Response | None = None
        headers: dict[str, str] = {}
        propagate.inject(headers)  # the request's span: call-log's spans go on in its trace
        try:
            async for attempt in stamina.retry_context(
                on=_retryable,
                attempts=attempts,
                timeout=within_s,
                wait_initial=self.backoff.first,
                wait_max=self.backoff.most,
                wait_jitter=self.backoff.jitter,
            ).with_name(f"call-log {method} {path}", (), {"call": call} if call else {}):
                with attempt:
                    response = await self.http.request(
                        method, path, content=content or None, timeout=timeout, headers=headers
                    )
                    if response.status_code >= 500:
                        raise _ServerError(response)
        except _ServerError as exc:
            raise CallLogUnavailable(str(exc), exc.status) from exc
        except httpx.TransportError as exc:
            raise CallLogUnavailable(f"nothing answered at {path}: {exc!r}") from exc
        assert response is not None
        if response.status_code >= 400:
            raise refused(response.status_code, response.content, unknown)
        return decode(response.content, reply)

    async def open(self, call: CallOpen, *, within_s: float | None = SEAL_WITHIN_S) -> CallRecord:
        """Open a call (idempotent: a retry whose answer was lost gets the same record)."""
        return await self.request("/v1/calls", call, CallRecord, within_s=within_s, call=call.call)

    async def record(self, call: str, *, within_s: float | None = SEAL_WITHIN_S) -> CallRecord:
        """What the call is and where its log stands; ``CallUnknown`` if the log has no such call."""
        return await self.request(
            f"/v1/calls/{call}", None, CallRecord, within_s=within_s, method="GET", call=call
        )

    async def callback(
        self, request: CallbackRequest, *, environment: str | None = None
    ) -> AgentEntry:
        """``callback.requested`` on the agent's log, once per call (a retry gets the first).
        An operator key names the ``environment`` (a fleet or app key has its own)."""
        path = "/v1/callbacks" + (f"?environment={environment}" if environment else "")
        return await self.request(
            path, request, AgentEntry, within_s=SEAL_WITHIN_S, call=request.call
        )

    async def callbacks(
        self, since: dt.datetime, *, limit: int = 500, within_s: float | None = SEAL_WITHIN_S
    ) -> CallbackPage:
        """Call backs of every environment requested at or after ``since`` (aware), oldest
        first, at most ``limit`` (a service or operator key): what the dispatcher's follow-ups
        are made from."""
        path = f"/v1/callbacks?{urlencode({'since': since.isoformat(), 'limit': limit})}"
        return await self.request(path, None, CallbackPage, within_s=within_s, method="GET")

    async def entries(
        self, call: str, after: int = 0, *, within_s: float | None = SEAL_WITHIN_S
    ) -> CallLog:
        """The call's entries with seq above ``after``, in order (a fleet key of its environment,
        an operator's or a service's); ``CallUnknown`` if the log has no such call."""
        path = f"/v1/calls/{call}/entries" + (f"?after={after}" if after else "")
        return await self.request(path, None, CallLog, within_s=within_s, method="GET", call=call)

    async def commands(
        self, call: str, after: int, *, wait_s: float = 20.0, within_s: float | None = None
    ) -> CallCommands:
        """The app's commands to ``call`` with seq above ``after``, the server waiting up to
        ``wait_s`` (at most 30) for one (a long poll: empty when none came); retried 0.5 s to
        5 s while nothing answers (``within_s``: None, until answered). ``CallUnknown`` if the
        log has no such call."""
        path = f"/v1/calls/{call}/commands?{urlencode({'after': after, 'wait_s': wait_s})}"
        return await self.request(
            path, None, CallCommands, within_s=within_s, method="GET", call=call, held_s=wait_s
        )

    async def agent_log(
        self,
        agent: str,
        *,
        environment: str | None = None,
        after: int = 0,
        within_s: float | None = SEAL_WITHIN_S,
    ) -> AgentLog:
        """The agent's log after ``after``: the key's environment's (an operator names it)."""
        query: dict[str, str | int] = {"after": after}
        if environment:
            query["environment"] = environment
        path = f"/v1/agents/{agent}/log?{urlencode(query)}"
        return await self.request(path, None, AgentLog, within_s=within_s, method="GET")

    async def agent_entry(
        self,
        agent: str,
        entry: AgentEntry,
        *,
        environment: str | None = None,
        within_s: float | None = SEAL_WITHIN_S,
    ) -> AgentEntry:
        """``entry`` on the agent's log (``fleet.full``, ``fleet.refused``, ``agent.draining``),
        as written. A service or operator key names the ``environment`` (a fleet key has its
        own)."""
        path = f"/v1/agents/{agent}/log" + (f"?environment={environment}" if environment else "")
        return await self.request(path, entry, AgentEntry, within_s=within_s)

    async def served(self, call: str, *, within_s: float | None = SEAL_WITHIN_S) -> Handed:
        """Say a written call is served anew (its session taken up again): the app's socket
        holding it hears ``call.attached`` again; ``attached`` whether one did."""
        return await self.request(
            f"/v1/calls/{call}/served", None, Handed, within_s=within_s, call=call
        )

    async def reopened(self, call: str, said: Reopened) -> CallRecord:
        return await self.request(
            f"/v1/calls/{call}/reopened", said, CallRecord, within_s=SEAL_WITHIN_S, call=call
        )

    async def end(
        self,
        call: str,
        outcome: Outcome,
        reason: str | None = None,
        *,
        cause: EndCause | None = None,
        at: dt.datetime | None = None,
    ) -> CallRecord:
        """End the call, retrying within 30 s (idempotent); ``cause`` says why a ``drained``
        one ended (``pinecall_contracts.calls.EndCause``), ``at`` when it ended (aware; None:
        when the log hears it)."""
        body = CallEnd(outcome=outcome, reason=reason, cause=cause, at=at)
        return await self.request(
            f"/v1/calls/{call}/end", body, CallRecord, within_s=SEAL_WITHIN_S, call=call
        )

    async def seal(
        self,
        call: str,
        outcome: Outcome | None = None,
        *,
        cause: EndCause | None = None,
        at: dt.datetime | None = None,
    ) -> CallRecord:
        """Seal the call, retrying within 30 s (idempotent); ``outcome``, ``cause`` and ``at``
        end it first when it is still open."""
        body = CallEnd(outcome=outcome, cause=cause, at=at)
        return await self.request(
            f"/v1/calls/{call}/seal", body, CallRecord, within_s=SEAL_WITHIN_S, call=call
        )

    async def tool(self, call: str, tool: ToolCall) -> ToolResult:
        """Run a tool once per id, retrying within its own deadline (``timeout_s``)."""
        return await self.request(
            f"/v1/calls/{call}/tools", tool, ToolResult, within_s=tool.timeout_s, call=call
        )

    # -- agents' definitions (issue 16): an app key of the environment, or an operator's ------

    async def put_agent(
        self,
        definition: AgentDefinition,
        *,
        org: str,
        environment: str | None = None,
        within_s: float | None = SEAL_WITHIN_S,
    ) -> AgentVersion:
        """Store ``definition`` as its agent's next version (the latest, unwritten, when it is
        the latest's: a retry is safe). An operator key names the ``environment``; a 422
        (``CallLogRefused``) names each rule the definition breaks."""
        path = f"/v1/agents/{definition.name}?{_scope(org, environment)}"
        return await self.request(path, definition, AgentVersion, within_s=within_s, method="PUT")

    async def agents(
        self, *, org: str, environment: str | None = None, within_s: float | None = SEAL_WITHIN_S
    ) -> AgentList:
        """The latest version of each of ``org``'s agents in the environment."""
        path = f"/v1/agents?{_scope(org, environment)}"
        return await self.request(path, None, AgentList, within_s=within_s, method="GET")

    async def agent(
        self,
        name: str,
        *,
        org: str,
        environment: str | None = None,
        version: int | None = None,
        within_s: float | None = SEAL_WITHIN_S,
        attempts: int | None = None,
    ) -> AgentVersion:
        """The agent's latest version, or ``version``; ``AgentUnknown`` when there is none. A
        service or operator key names the ``environment``; ``attempts`` as :meth:`request`."""
        query = _scope(org, environment) + (f"&version={version}" if version is not None else "")
        return await self.request(
            f"/v1/agents/{name}?{query}",
            None,
            AgentVersion,
            within_s=within_s,
            method="GET",
            unknown=AgentUnknown,
            attempts=attempts,
        )

    def writer(
        self,
        call: str,
        *,
        written: int = 0,
        reopen: Reopened | None = None,
        batch_timeout_s: float | None = None,
        sender: BatchSender | None = None,
    ) -> CallLogWriter:
        """The call's one writer, following on from ``written`` (0 for a new call); its batches
        go through ``sender`` (a worker's :class:`~pinecall_clients.relay.BatchRelay`, or a
        client of its socket), else each alone through this client."""
        return CallLogWriter(
            self,
            call,
            written=written,
            reopen=reopen,
            batch_timeout_s=batch_timeout_s,
            sender=sender,
        )

    async def write_batch(
        self, call: str, batch: EntryBatch, *, within_s: float | None
    ) -> BatchWritten:
        """``POST /v1/calls/{call}/entries``: one call's batch (:class:`BatchSender`). Raises
        ``BatchRefused`` (409), ``CallUnknown`` (404), another ``CallLogRefused`` (4xx), or
        ``CallLogUnavailable`` when nothing answered within ``within_s``."""
        return await self.request(
            f"/v1/calls/{call}/entries", batch, BatchWritten, within_s=within_s, call=call
        )

    async def put_number(
        self,
        phone_number_id: str,
        number: WhatsAppNumberPut,
        *,
        org: str,
        environment: str | None = None,
        within_s: float | None = SEAL_WITHIN_S,
    ) -> WhatsAppNumber:
        """Tie a WhatsApp number to an agent of ``org`` with its secrets (a retry is safe); a
        409 (``CallLogRefused``) when another org or environment holds it, a 422 when the agent
        is not defined there."""
        path = f"/v1/whatsapp/numbers/{phone_number_id}?{_scope(org, environment)}"
        return await self.request(path, number, WhatsAppNumber, within_s=within_s, method="PUT")

    async def numbers(
        self, *, org: str, environment: str | None = None, within_s: float | None = SEAL_WITHIN_S
    ) -> WhatsAppNumberList:
        """``org``'s WhatsApp numbers in the environment (no secret in them)."""
        path = f"/v1/whatsapp/numbers?{_scope(org, environment)}"
        return await self.request(path, None, WhatsAppNumberList, within_s=within_s, method="GET")

    async def number(
        self,
        phone_number_id: str,
        *,
        org: str,
        environment: str | None = None,
        within_s: float | None = SEAL_WITHIN_S,
    ) -> WhatsAppNumber:
        """One of ``org``'s WhatsApp numbers (``CallUnknown`` for a 404)."""
        path = f"/v1/whatsapp/numbers/{phone_number_id}?{_scope(org, environment)}"
        return await self.request(path, None, WhatsAppNumber, within_s=within_s, method="GET")


def _scope(org: str, environment: str | None) -> str:
    query = {"org": org} | ({"environment": environment} if environment else {})
    return urlencode(query)


__all__ = [
    "SEAL_WITHIN_S",
    "AgentUnknown",
    "Backoff",
    "CallLogClient",
    "CallLogRefused",
    "CallLogUnavailable",
    "CallLogWriter",
]
