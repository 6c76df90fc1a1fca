"""A worker's calls' batches to the log in one request (issue 20): :class:`BatchRelay`.

A call-log replica's cost is per request, and a request a call a second is the floor of one
(the last stops measured 0.83 cores per 1 000 calls at it). A worker's calls flush on one clock
(the worker's tick), so their batches arrive at its relay together; the relay waits
:data:`GATHER_S` for the tick's others and sends what waits as one ``POST /v1/entries``
(:class:`~pinecall_contracts.calls.WorkerBatch`), up to ``calls.CALLS_A_BATCH`` batches and
:data:`REQUEST_BYTES` of entries a request.

Each batch is still its own: it keeps its writer's count (``after``), is written, replayed or
refused on its own, and its writer hears exactly what ``POST /v1/calls/{call}/entries`` would
have said (:meth:`BatchRelay.write_batch`). What the combined request cannot say for a batch is
asked for it alone on that route, by the client's own retries: a batch whose answer was a 5xx
(Postgres did not answer for it), and each batch of a request refused for its body (400, 413,
422: one batch's, say a character Postgres cannot store, must not refuse the others). A request
nothing answered is retried unchanged, as a batch alone is; a writer that stops waiting (its
``batch_timeout_s``) sends its batch again later, after the same count, so the log writes it once
whichever answer arrives.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from opentelemetry import context

from pinecall_clients.calllog import CallLogClient
from pinecall_clients.errors import (
    BatchRefused,
    CallLogError,
    CallLogRefused,
    CallLogUnavailable,
    CallUnknown,
)
from pinecall_clients.writer import BATCH_BYTES
from pinecall_contracts.calls import (
    CALLS_A_BATCH,
    BatchWritten,
    CallBatch,
    EntryBatch,
    WorkerBatch,
    WorkerBatchWritten,
    entry_bytes,
)
from pinecall_contracts.problems import ProblemDetails
from pinecall_servicekit import calltrace

_log = logging.getLogger(__name__)

Part = tuple[CallBatch, asyncio.Future[BatchWritten]]
"""A batch waiting or in flight, and its writer's answer to come."""

GATHER_S = 0.005
"""How long the relay waits, from a batch's arrival with none waiting, for the rest of its tick
(the worker's calls flush on one clock; 32 job processes wake within a few ms of it)."""
REQUEST_BYTES = BATCH_BYTES
"""A request's entries' data as JSON, at most this many bytes (or one batch): no request larger
than one writer's largest batch (``writer.BATCH_BYTES``), under call-log's 10 MB body cap and
under the 1 MiB past which aiohttp warns that a body sent as bytes holds the event loop."""
IN_FLIGHT = 4
"""Requests in flight at once: a slow one does not hold the next tick's batches."""
OWN_ROUTE = frozenset({400, 404, 405, 413, 422})
"""A combined request's refusals that are not its batches' own: its body (400, 413, 422), or a
call-log that does not serve ``POST /v1/entries`` (404, 405: an older release behind the same
address, a route an ingress does not pass). Each batch is then asked for alone."""
UNSERVED = frozenset({404, 405})
"""Of :data:`OWN_ROUTE`, the route's own refusals, whatever the batches."""
TRACEPARENT_MAX = 512
"""A ``traceparent`` longer than this is not sent on (W3C's is 55 characters): one job's bad
header must not make its tick's request a 400."""


def refusal(problem: ProblemDetails) -> CallLogError:
    """A batch's problem detail as the error its own route's answer would have raised."""
    if problem.status == 404:
        return CallUnknown(problem)
    if problem.status == 409:
        return BatchRefused(problem)
    if problem.status >= 500:
        return CallLogUnavailable(problem.detail or problem.title, problem.status)
    return CallLogRefused(problem)


class BatchRelay:
    """A worker's relay: :meth:`write_batch` from each call's writer, one request a tick.

    ``requests`` and ``batches`` count what was sent (for tests and the load: the batches a
    request). Close with :meth:`aclose`; the client is the caller's.
    """

    def __init__(
        self,
        client: CallLogClient,
        *,
        gather_s: float = GATHER_S,
        within_s: float | None = None,
    ) -> None:
        self.client = client
        self.gather_s = gather_s
        self.within_s = within_s
        self.requests = 0
        self.batches = 0
        self._waiting: list[Part] = []
        self._arrived = asyncio.Event()
        self._room = asyncio.Semaphore(IN_FLIGHT)
        self._task: asyncio.Task[None] | None = None
        self._sending: dict[asyncio.Task[None], Sequence[Part]] = {}
        self._closed = False

    async def write_batch(
        self,
        call: str,
        batch: EntryBatch,
        *,
        within_s: float | None,
        traceparent: str | None = None,
    ) -> BatchWritten:
        """``batch`` of ``call`` written with the worker's others: as
        :meth:`CallLogClient.write_batch` answers or raises. ``within_s`` bounds the wait
        (``CallLogUnavailable`` past it; the batch may still be written, and sent again after
        the same count it is a replay). ``traceparent``: the writer's trace context (by default
        the current one), which call-log writes the batch's span in (the call's trace)."""
        if self._closed:
            raise CallLogUnavailable(f"call {call}: the worker's relay is closed")
        future: asyncio.Future[BatchWritten] = asyncio.get_running_loop().create_future()
        said = traceparent or calltrace.traceparent()
        part = CallBatch(
            call=call,
            after=batch.after,
            entries=batch.entries,
            traceparent=said if said and len(said) <= TRACEPARENT_MAX else None,
        )
        self._waiting.append((part, future))
        self._arrived.set()
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(), name="call-log relay")
        try:
            async with asyncio.timeout(within_s):
                return await future
        except TimeoutError:
            raise CallLogUnavailable(
                f"call {call}: its batch after {batch.after} went unanswered for {within_s} s"
            ) from None

    async def aclose(self) -> None:
        """Stop sending and take no more: the batches waiting or in flight are answered
        ``CallLogUnavailable`` now (their writers send them again, after the same count; one in
        flight may still be written, and is then a replay)."""
        self._closed = True
        held = [f for _, f in self._waiting] + [f for ps in self._sending.values() for _, f in ps]
        tasks = [t for t in (self._task, *self._sending) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._task = None
        self._waiting.clear()
        for future in held:
            _answer(future, CallLogUnavailable("the worker's relay closed"))

    async def _run(self) -> None:
        while True:
            await self._arrived.wait()
            await asyncio.sleep(self.gather_s)  # the rest of the tick
            self._arrived.clear()
            while parts := self._take():
                await self._room.acquire()
                task = asyncio.create_task(self._send(parts), name="call-log relay request")
                self._sending[task] = parts
                task.add_done_callback(self._sent)

    def _sent(self, task: asyncio.Task[None]) -> None:
        self._sending.pop(task, None)
        self._room.release()

    def _take(self) -> list[Part]:
        """What waits, up to a request's bounds; a batch whose writer stopped waiting is left
        out (it sends it again)."""
        self._waiting = [(b, f) for b, f in self._waiting if not f.done()]
        used = count = 0
        for part, _ in self._waiting[:CALLS_A_BATCH]:
            used += sum(entry_bytes(e.data) for e in part.entries)
            if count and used > REQUEST_BYTES:
                break
            count += 1
        taken, self._waiting = self._waiting[:count], self._waiting[count:]
        return taken

    async def _send(self, parts: Sequence[Part]) -> None:
        self.requests += 1
        self.batches += len(parts)
        alone: list[Part] = []
        try:
            answer = await self.client.request(
                "/v1/entries",
                WorkerBatch(batches=[b for b, _ in parts]),
                WorkerBatchWritten,
                within_s=self.within_s,
            )
        except CallLogRefused as exc:
            body = exc.status not in UNSERVED  # one batch's body is its own refusal
            if exc.status not in OWN_ROUTE or (body and len(parts) == 1):
                _settle(parts, exc)
                return
            alone = list(parts)
        except CallLogError as exc:
            _settle(parts, exc)
            return
        except Exception as exc:  # a bug of ours or an answer not the log's: said, and sent again
            _log.exception("the relay could not send a worker's %d batches", len(parts))
            _settle(parts, CallLogUnavailable(f"the relay failed: {exc!r}"))
            return
        else:
            if len(answer.answers) != len(parts):  # not the log's answer: each asked alone
                _log.error("call-log answered %d batches %d times", len(parts), len(answer.answers))
                alone = list(parts)
            else:
                for (part, future), said in zip(parts, answer.answers, strict=True):
                    if said.written is not None:
                        _answer(future, said.written)
                    elif said.problem is None or said.problem.status >= 500:
                        alone.append((part, future))
                    else:
                        _answer(future, refusal(said.problem))
        await asyncio.gather(*(self._alone(part, future) for part, future in alone))

    async def _alone(self, part: CallBatch, future: asyncio.Future[BatchWritten]) -> None:
        """``part`` on its own route, retried as a batch alone is, in its writer's trace (the
        ``traceparent`` it came with; the relay's task runs in whichever writer's context
        started it), so call-log's span of it is in its call's trace as through the relay."""
        batch = EntryBatch(after=part.after, entries=part.entries)
        writers = calltrace.from_traceparent(part.traceparent)
        token = None if writers is None else context.attach(writers)
        try:
            _answer(future, await self.client.write_batch(part.call, batch, within_s=self.within_s))
        except CallLogError as exc:
            _answer(future, exc)
        finally:
            if token is not None:
                context.detach(token)


def _answer(future: asyncio.Future[BatchWritten], said: BatchWritten | CallLogError) -> None:
    if future.done():  # its writer stopped waiting: it sends the batch again
        return
    if isinstance(said, BatchWritten):
        future.set_result(said)
    else:
        future.set_exception(said)


def _settle(parts: Sequence[Part], error: CallLogError) -> None:
    _log.warning("call-log did not take a worker's %d batches: %s", len(parts), error)
    for _, future in parts:
        _answer(future, error)
