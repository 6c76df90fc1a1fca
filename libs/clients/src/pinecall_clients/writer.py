"""A call's one writer (seed 002, "The gateway restarts"), on :class:`CallLogClient`.

What is queued goes as one batch (up to 500 entries), after the writer's count; a batch whose
answer was lost goes again unchanged after the same count, so the log writes it once. A 409
refuses the whole batch: it is kept in :attr:`CallLogWriter.refused` and the writer goes on from
the count the log said. A batch the log cannot take as it is (400, 413, 422: sent again it would
be refused again) is dropped into :attr:`CallLogWriter.dropped`, said in the log, and the call
goes on; so the writer never sends what the log would refuse for its size or characters: an
entry whose data is over ``calls.MAX_ENTRY_BYTES`` (64 KiB as JSON) is queued with
``{"omitted_bytes": <n>, "over": 65536}`` as its data (its kind and time kept, said in the log),
a batch holds at most :data:`BATCH_BYTES` of data (far under the 10 MB body cap), and a NUL
character, which Postgres cannot store, is written as U+FFFD (:func:`storable`). A 404 (a call an
older release opened) is answered by saying the call again once (``reopened``) and sending the
batch again. A writer can follow on from another writer's count (``written=``): the job sent into
a dead worker's room continues that log.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

import msgspec

from pinecall_clients.errors import BatchRefused, CallLogRefused, CallUnknown
from pinecall_contracts.calls import (
    MAX_BATCH,
    MAX_ENTRY_BYTES,
    OMITTED,
    BatchWritten,
    Entry,
    EntryBatch,
    Reopened,
    entry_bytes,
)

if TYPE_CHECKING:
    from pinecall_clients.calllog import CallLogClient


class BatchSender(Protocol):
    """Where a writer's batches go: :class:`~pinecall_clients.calllog.CallLogClient` itself
    (each alone), or a worker's :class:`~pinecall_clients.relay.BatchRelay` (with its other
    calls'), each answering or raising as ``POST /v1/calls/{call}/entries`` would."""

    async def write_batch(
        self, call: str, batch: EntryBatch, *, within_s: float | None
    ) -> BatchWritten: ...


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
        sender: BatchSender | None = None,
    ) -> None:
        self.client = client
        self.sender: BatchSender = sender or client
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
        within_s = self._batch_timeout_s
        try:
            return await self.sender.write_batch(self.call, batch, within_s=within_s)
        except CallUnknown:
            if self._reopen is None or self._reopened:
                raise
        said = msgspec.structs.replace(self._reopen, written=batch.after)
        await self.client.reopened(self.call, said)
        self._reopened = True
        return await self.sender.write_batch(self.call, batch, within_s=within_s)
