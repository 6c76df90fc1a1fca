"""The call log's client, and a call's one writer (seed 002, "The gateway restarts").

Retries (``shared/DESIGN.md``, "Numbers the runtime lives by"): a request is sent again, unchanged,
backing off from 0.5 s to 5 s while nothing answers or a 5xx does; a 4xx is an answer and is never
retried. A batch retries until it is answered (or the writer's ``batch_timeout_s``); a tool call
within its own deadline; the end and the seal within 30 s. Retries are stamina's
(``stamina.retry_context``), never a loop of our own; each is named ``call-log <METHOD> <path>``
with its call (``call=``), so the hook that logs a retry
(:func:`pinecall_servicekit.telemetry.said_retry`) says which request of which call failed.

The writer: what is queued goes as one batch (up to 500 entries), after the writer's count; a batch
whose answer was lost goes again unchanged after the same count, so the log writes it once. A 409
refuses the whole batch: it is kept in :attr:`CallLogWriter.refused` and the writer goes on from
the count the log said. A batch the log cannot take as it is (400, 413, 422: sent again it would
be refused again) is dropped into :attr:`CallLogWriter.dropped`, said in the log, and the call
goes on; so the writer never sends what the log would refuse for its size or characters: an
entry whose data is over ``calls.MAX_ENTRY_BYTES`` (64 KiB as JSON) is queued with
``{"omitted_bytes": <n>, "over": 65536}`` as its data (its kind and time kept, said in the log),
a batch holds at most :data:`BATCH_BYTES` of data (far under the 10 MB body cap), and a NUL
character, which Postgres cannot store, is written as U+FFFD (:func:`storable`). A 404 (a call an older release opened) is answered by saying the call
again once (``reopened``) and sending the batch again. A writer can follow on from another
writer's count (``written=``): the job sent into a dead worker's room continues that log.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx
import msgspec
import stamina

from pinecall_clients.errors import (
    BatchRefused,
    CallLogRefused,
    CallLogUnavailable,
    CallUnknown,
    refused,
)
from pinecall_contracts.base import Contract, decode, encode
from pinecall_contracts.calls import (
    MAX_BATCH,
    MAX_ENTRY_BYTES,
    OMITTED,
    AgentEntry,
    BatchWritten,
    CallbackRequest,
    CallEnd,
    CallOpen,
    CallRecord,
    Entry,
    EntryBatch,
    Outcome,
    Reopened,
    ToolCall,
    ToolResult,
    entry_bytes,
)

R = TypeVar("R", bound=Contract)

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
    client speaks HTTP to ``base_url``. Close with :meth:`aclose` (or ``async with``).
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
    ) -> None:
        self.http = httpx.AsyncClient(
            base_url=base_url,
            transport=transport,
            limits=limits or httpx.Limits(max_connections=100, max_keepalive_connections=20),
            headers={"Authorization": f"Bearer {key}", "content-type": "application/json"},
            timeout=request_timeout_s,
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
    ) -> R:
        """Send ``body`` unchanged until something other than silence or a 5xx answers.

        ``within_s`` bounds the retries (None: until answered); ``call``, the call the request is
        about, is said with each retry. Raises ``CallLogUnavailable`` when it runs out, a
        ``CallLogRefused`` for a 4xx.
        """
        content = b"" if body is None else encode(body)
        timeout = max(self.request_timeout_s, within_s or 0.0)
        response: httpx.Response | None = None
        try:
            async for attempt in stamina.retry_context(
                on=_retryable,
                attempts=None,
                timeout=within_s,
                wait_initial=self.backoff.first,
                wait_max=self.backoff.most,
                wait_jitter=self.backoff.jitter,
            ).with_name(f"call-log {method} {path}", (), {"call": call} if call else {}):
                with attempt:
                    response = await self.http.request(
                        method, path, content=content or None, timeout=timeout
                    )
                    if response.status_code >= 500:
                        raise _ServerError(response)
        except _ServerError as exc:
            raise CallLogUnavailable(str(exc), exc.status) from exc
        except httpx.TransportError as exc:
            raise CallLogUnavailable(f"nothing answered at {path}: {exc!r}") from exc
        assert response is not None
        if response.status_code >= 400:
            raise refused(response.status_code, response.content)
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

    async def reopened(self, call: str, said: Reopened) -> CallRecord:
        return await self.request(
            f"/v1/calls/{call}/reopened", said, CallRecord, within_s=SEAL_WITHIN_S, call=call
        )

    async def end(self, call: str, outcome: Outcome, reason: str | None = None) -> CallRecord:
        """End the call, retrying within 30 s (idempotent)."""
        body = CallEnd(outcome=outcome, reason=reason)
        return await self.request(
            f"/v1/calls/{call}/end", body, CallRecord, within_s=SEAL_WITHIN_S, call=call
        )

    async def seal(self, call: str, outcome: Outcome | None = None) -> CallRecord:
        """Seal the call, retrying within 30 s (idempotent)."""
        body = CallEnd(outcome=outcome)
        return await self.request(
            f"/v1/calls/{call}/seal", body, CallRecord, within_s=SEAL_WITHIN_S, call=call
        )

    async def tool(self, call: str, tool: ToolCall) -> ToolResult:
        """Run a tool once per id, retrying within its own deadline (``timeout_s``)."""
        return await self.request(
            f"/v1/calls/{call}/tools", tool, ToolResult, within_s=tool.timeout_s, call=call
        )

    def writer(
        self,
        call: str,
        *,
        written: int = 0,
        reopen: Reopened | None = None,
        batch_timeout_s: float | None = None,
    ) -> CallLogWriter:
        """The call's one writer, following on from ``written`` (0 for a new call)."""
        return CallLogWriter(
            self, call, written=written, reopen=reopen, batch_timeout_s=batch_timeout_s
        )


_log = logging.getLogger(__name__)

BAD_BATCH = frozenset({400, 413, 422})
"""A batch's refusals that are about the batch itself: the same batch would be refused again."""


BATCH_BYTES = 1_000_000
"""A batch's entries' data as JSON, at most this many bytes (or one entry, which is at most
``calls.MAX_ENTRY_BYTES``): 500 entries of 64 KiB would pass call-log's 10 MB body cap (413)."""


def bounded(call: str, entry: Entry) -> Entry:
    """``entry`` with storable data (:func:`storable`), its data replaced by
    ``{"omitted_bytes": <n>, "over": MAX_ENTRY_BYTES}`` when it is over ``MAX_ENTRY_BYTES`` as
    JSON: call-log would refuse it (422), and with it the whole batch."""
    data = storable(entry.data)
    if (size := entry_bytes(data)) > MAX_ENTRY_BYTES:
        _log.error(
            "call %s: a %s entry's data is %d bytes, over the log's %d: written without it",
            call,
            entry.kind,
            size,
            MAX_ENTRY_BYTES,
        )
        data = {OMITTED: size, "over": MAX_ENTRY_BYTES}
    return msgspec.structs.replace(entry, data=data)


def storable(value: Any) -> Any:
    """``value`` with every NUL character of its strings (keys too) replaced by U+FFFD: Postgres
    stores no NUL in text or JSON, and one would refuse the entry's whole batch."""
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd") if "\x00" in value else value
    if isinstance(value, dict):
        return {storable(k): storable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [storable(v) for v in value]
    return value


class CallLogWriter:
    """A call's one writer: queue with :meth:`add`, send with :meth:`flush`.

    ``written`` is the writer's count: entries the log took from it. One flush runs at a time.
    """

    def __init__(
        self,
        client: CallLogClient,
        call: str,
        *,
        written: int = 0,
        reopen: Reopened | None = None,
        batch_timeout_s: float | None = None,
    ) -> None:
        self.client = client
        self.call = call
        self.written = written
        self.refused: list[tuple[EntryBatch, BatchRefused]] = []
        """Batches a 409 refused, with its answer; the writer went on without them."""
        self.dropped: list[tuple[EntryBatch, CallLogRefused]] = []
        """Batches the log could not take as they were (:data:`BAD_BATCH`), with its answer."""
        self._reopen = reopen
        self._reopened = False
        self._batch_timeout_s = batch_timeout_s
        self._queue: list[Entry] = []
        self._pending: EntryBatch | None = None
        self._lock = asyncio.Lock()

    @property
    def queued(self) -> int:
        """Entries not yet taken by the log (queued, or in a batch still unanswered)."""
        return len(self._queue) + (len(self._pending.entries) if self._pending else 0)

    def add(
        self, kind: str, data: dict[str, Any] | None = None, ts: dt.datetime | None = None
    ) -> None:
        """Queue an entry; ``ts`` (when it happened) defaults to now, in UTC."""
        when = ts or dt.datetime.now(dt.UTC)
        self._queue.append(bounded(self.call, Entry(kind=kind, ts=when, data=data or {})))

    def extend(self, entries: Sequence[Entry]) -> None:
        self._queue.extend(bounded(self.call, e) for e in entries)

    def _next_batch(self) -> list[Entry]:
        """The queue's head as a batch: up to ``MAX_BATCH`` entries and :data:`BATCH_BYTES`."""
        used = count = 0
        for entry in self._queue[:MAX_BATCH]:
            used += entry_bytes(entry.data)
            if count and used > BATCH_BYTES:
                break
            count += 1
        entries, self._queue = self._queue[:count], self._queue[count:]
        return entries

    async def flush(self) -> BatchWritten | None:
        """Send the unanswered batch again, or what is queued as one batch; None if nothing
        was queued or a 409 refused it. Raises ``CallLogUnavailable`` if the batch went
        unanswered for ``batch_timeout_s`` (it is sent again, unchanged, by the next flush)."""
        async with self._lock:
            if self._pending is None:
                if not self._queue:
                    return None
                self._pending = EntryBatch(after=self.written, entries=self._next_batch())
            batch = self._pending
            try:
                answer = await self._send(batch)
            except BatchRefused as exc:
                self._pending = None
                self.refused.append((batch, exc))
                if exc.written is not None:
                    self.written = exc.written
                return None
            except CallLogRefused as exc:
                if exc.status not in BAD_BATCH:
                    raise
                self._pending = None
                self.dropped.append((batch, exc))
                _log.error(
                    "call %s: the log cannot take a batch of %d entries after %d (%s): dropped",
                    self.call,
                    len(batch.entries),
                    batch.after,
                    exc,
                )
                return None
            self._pending = None
            self.written = answer.written
            return answer

    async def drain(self) -> None:
        """Flush until nothing is queued."""
        while self.queued:
            await self.flush()

    async def _send(self, batch: EntryBatch) -> BatchWritten:
        path = f"/v1/calls/{self.call}/entries"
        try:
            return await self.client.request(
                path, batch, BatchWritten, within_s=self._batch_timeout_s, call=self.call
            )
        except CallUnknown:
            if self._reopen is None or self._reopened:
                raise
        said = msgspec.structs.replace(self._reopen, written=batch.after)
        await self.client.reopened(self.call, said)
        self._reopened = True
        return await self.client.request(
            path, batch, BatchWritten, within_s=self._batch_timeout_s, call=self.call
        )


__all__ = [
    "Backoff",
    "CallLogClient",
    "CallLogRefused",
    "CallLogUnavailable",
    "CallLogWriter",
]
