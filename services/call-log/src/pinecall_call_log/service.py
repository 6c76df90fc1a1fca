"""One call-log replica: the store, what each call is (kept in memory), NATS; its tool round
trips are :class:`~pinecall_call_log.toolcalls.ToolCalls`.

App sockets (issue 16): the replica's :class:`~pinecall_call_log.sockets.hub.Hub` is told of
every call opened (handed to a socket holding its agent, here or on another replica), tool asked
(:mod:`~pinecall_call_log.toolcalls`) and call ended.
The app's commands are ``call.command`` entries on the call's log, once per app-minted id: the
log is the command stream a worker follows (:meth:`CallLogService.commands`, a long poll woken by
``<ns>.calls.command.<call>``).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import platform
from collections import Counter, OrderedDict
from collections.abc import Iterator
from typing import Any

import msgspec
from opentelemetry import trace
from prometheus_client import Histogram

from pinecall_call_log import domain
from pinecall_call_log.settings import CallLogSettings
from pinecall_call_log.sockets.hub import Hub
from pinecall_call_log.store import Store
from pinecall_call_log.toolcalls import ToolCalls
from pinecall_contracts.appsocket import Handed
from pinecall_contracts.calls import (
    Appended,
    BatchWritten,
    CallBatch,
    CallCommands,
    CallEvent,
    CallOpen,
    CallRecord,
    EndCause,
    Entry,
    Outcome,
    Reopened,
)
from pinecall_contracts.metrics import LATENCY_BUCKETS_S
from pinecall_servicekit import calltrace, db, telemetry
from pinecall_servicekit.bus import Bus
from pinecall_servicekit.changes import Changes
from pinecall_servicekit.errors import NotFound, PinecallError, Unprocessable
from pinecall_servicekit.keys import KeyRing

_tracer = trace.get_tracer(__name__)


def _batch_spans(batches: list[CallBatch]) -> dict[int, trace.Span]:
    """A span ``write entries`` for each batch that names its writer's trace, in that trace (the
    call's, issue 22), linked to the request that carried it; keyed by the batch's ``id``."""
    carried = trace.get_current_span().get_span_context()
    links = [trace.Link(carried)] if carried.is_valid else []
    spans: dict[int, trace.Span] = {}
    for b in batches:
        if (context := calltrace.from_traceparent(b.traceparent)) is not None:
            spans[id(b)] = _tracer.start_span(
                "write entries",
                context=context,
                links=links,
                attributes={
                    calltrace.CALL: b.call,
                    "pinecall.batch.after": b.after,
                    "pinecall.batch.entries": len(b.entries),
                },
            )
    return spans


class CallLogService:
    """The call log of one replica; :meth:`start` subscribes, :meth:`stop` lets go."""

    def __init__(self, settings: CallLogSettings, bus: Bus, store: Store, keyring: KeyRing) -> None:
        self.settings = settings
        self.bus = bus
        self.store = store
        self.keyring = keyring
        self._calls: OrderedDict[str, CallRecord] = OrderedDict()
        self.batches = 0
        """Batches answered (written or replayed), for metrics."""
        self.entries = 0
        """Entries written from batches and ``/events``, for metrics."""
        self.write_errors = 0
        """Writes (opens, batches, events, ends) that failed 5xx: the log did not take them."""
        self.callbacks: Counter[str] = Counter()
        """Call backs requested here, by environment (written now, not a retry's)."""
        self.recordings: Counter[tuple[str, str]] = Counter()
        """Recordings said on the logs here (written now, not a replay's), by environment and
        outcome (:func:`pinecall_call_log.domain.recording_outcome`, issue 19)."""
        self.batch_write = Histogram(
            "pinecall_call_log_batch_write_seconds",
            "a batch of entries written (or found written) in Postgres",
            buckets=LATENCY_BUCKETS_S,
            registry=None,
        )
        self.changes = Changes()
        """Notified when a tool call's waiter, or a command poll, starts waiting here (for tests
        and ops)."""
        self._polls: Counter[str] = Counter()
        self.hub = Hub(settings, store, bus, replica=f"{platform.node()}.{id(self):x}")
        """This replica's app sockets."""
        self.tools = ToolCalls(store, bus, self.hub, self.changes, self.identity, self._appended)
        """This replica's tool round trips."""

    async def start(self) -> None:
        await self.keyring.start()
        await self.tools.start()
        await self.hub.start()

    async def stop(self) -> None:
        self.hub.close_all()
        await self.hub.stop()
        self.tools.stop()

    # -- what a call is ---------------------------------------------------------------------

    @property
    def cached(self) -> int:
        """Calls whose identity this replica holds in memory."""
        return len(self._calls)

    def _keep(self, record: CallRecord) -> CallRecord:
        """Remember what ``record`` is, without its config (an agent's prompt and tools: up to
        tens of KB a call, which ``cache_calls`` of them would make a replica's memory)."""
        self._calls[record.call] = msgspec.structs.replace(record, config={})
        self._calls.move_to_end(record.call)
        while len(self._calls) > self.settings.cache_calls:
            self._calls.popitem(last=False)
        return record

    async def identity(self, call: str) -> CallRecord:
        """What ``call`` is (agent, environment, room, worker): from memory, or one read.

        Only the fields written at open are to be read from it, never where the log stands, nor
        its config (not kept in memory: read the record for it). Raises ``NotFound`` for a call this log does not hold.
        """
        held = self._calls.get(call)
        if held is not None:
            return held
        record = await self.store.calls.record(call)
        if record is None:
            raise NotFound(f"no call {call} on this log (an older release's call: say it reopened)")
        return self._keep(record)

    # -- the log ----------------------------------------------------------------------------

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """Count a write that fails 5xx (Postgres or NATS did not answer, or a bug) in
        :attr:`write_errors`; the caller's own errors (4xx) are not the log's."""
        try:
            yield
        except PinecallError as exc:
            if exc.status >= 500:
                self.write_errors += 1
            raise
        except Exception:
            self.write_errors += 1
            raise

    async def open(self, o: CallOpen) -> CallRecord:
        """Open the call on the latest version of its agent (kept on the call: the version it
        runs; none when its org defines no such agent); a retry gets the call as it opened."""
        with self._writing():
            return await self._open(o)

    async def _open(self, o: CallOpen) -> CallRecord:
        agent = await self.store.definitions.get(o.org, o.environment, o.agent)
        record, made = await self.store.calls.open(o, db.utcnow(), agent)
        self._keep(record)
        if made:
            await self._event("opened", record)
            await self._appended(record.call, record.last_seq)
            await self.hub.opened(record)
        return record

    async def served(self, call: str) -> Handed:
        """``call`` is served anew (:meth:`Hub.served`): whether a socket heard it attached."""
        record = await self.store.calls.record(call)
        if record is None:
            raise NotFound(f"no call {call} on this log")
        return Handed(attached=await self.hub.served(record))

    async def reopen(self, call: str, r: Reopened, environment: str) -> CallRecord:
        record, _ = await self.store.calls.reopen(call, r, environment, db.utcnow())
        return self._keep(record)

    async def write(self, call: str, after: int, entries: list[Entry]) -> BatchWritten:
        digests = [domain.digest(e) for e in entries]
        with self._writing(), self.batch_write.time():
            answer = await self.store.calls.write_batch(call, after, entries, digests, db.utcnow())
        await self._took(call, entries, answer)
        return answer

    async def write_batches(self, batches: list[CallBatch]) -> list[BatchWritten | PinecallError]:
        """A worker's batches (``POST /v1/entries``), each answered as :meth:`write` would
        answer it alone: its ``BatchWritten`` or the error :meth:`write` would raise, in order
        (:meth:`~pinecall_call_log.store.calls.CallStore.write_batches`)."""
        digests = [[domain.digest(e) for e in b.entries] for b in batches]
        spans = _batch_spans(batches) if telemetry.exports_spans() else {}
        try:
            with self.batch_write.time():
                answers = await self.store.calls.write_batches(batches, digests, db.utcnow())
            for b, answer in zip(batches, answers, strict=True):
                if isinstance(answer, PinecallError):
                    self.write_errors += answer.status >= 500
                else:
                    await self._took(b.call, b.entries, answer)
                if (span := spans.get(id(b))) is not None:
                    status = answer.status if isinstance(answer, PinecallError) else 200
                    span.set_attribute("pinecall.batch.status", status)
        finally:
            for span in spans.values():
                span.end()
        return answers

    async def _took(self, call: str, entries: list[Entry], answer: BatchWritten) -> None:
        """Count a batch answered, and say what it wrote (``appended``, a recording's outcome)."""
        self.batches += 1
        if answer.seqs and not answer.replayed:
            self.entries += len(answer.seqs)
            if outcomes := [o for e in entries if (o := domain.recording_outcome(e)) is not None]:
                environment = (await self.identity(call)).environment
                self.recordings.update((environment, o) for o in outcomes)
            await self._appended(call, answer.seqs[-1])

    async def event(self, call: str, entry: Entry) -> int:
        with self._writing():
            seq = await self.store.calls.write_event(call, entry, db.utcnow())
        self.entries += 1
        await self._appended(call, seq)
        return seq

    async def end(
        self,
        call: str,
        outcome: Outcome | None,
        reason: str | None,
        *,
        seal: bool,
        cause: EndCause | None = None,
        at: dt.datetime | None = None,
    ) -> CallRecord:
        """End (and with ``seal``, seal) ``call``, its end stamped ``at`` (``CallEnd.at``); say
        on NATS what changed."""
        with self._writing():
            record, done = await self.store.calls.end(
                call, outcome, reason, db.utcnow(), seal=seal, cause=cause, at=at
            )
        for what in done:
            await self._event(what, record)
        if done:
            await self._appended(call, record.last_seq)
        if "ended" in done:
            await self.hub.ended(call, record.last_seq)
        return record

    async def command(self, call: str, data: dict[str, Any]) -> tuple[int, bool]:
        """An app's ``say`` or ``end`` on the call's log, once per its ``id``: (seq, written
        now). ``NotFound``/``Conflict`` for an unknown call or one that is over;
        ``Unprocessable`` for one over ``calls.MAX_ENTRY_BYTES`` as JSON."""
        if (why := domain.entry_too_large("call.command", data)) is not None:
            raise Unprocessable(why)
        seq, wrote = await self.store.held.command(call, data, db.utcnow())
        if wrote:
            await self._appended(call, seq)
            await self.bus.publish(
                self.bus.subjects.command(call), Appended(call=call, last_seq=seq)
            )
        return seq, wrote

    async def commands(self, call: str, after: int, wait_s: float) -> CallCommands:
        """The call's commands after seq ``after``; when there is none and the call is open,
        waits up to ``wait_s`` for one. Woken by ``calls.command`` (subscribed before the first
        read, so one written between a read and the wait is heard; the call's turns do not wake
        it) and by ``call.ended`` (its state then answers); a notice lost costs at most
        ``wait_s``. ``NotFound`` for an unknown call."""
        notice = asyncio.Event()

        async def heard(_: Appended | CallEvent) -> None:
            notice.set()

        subjects = self.bus.subjects
        subscriptions = [
            await self.bus.subscribe(subjects.command(call), Appended, heard),
            await self.bus.subscribe(subjects.call_event("ended", call), CallEvent, heard),
        ]
        try:
            until = asyncio.get_running_loop().time() + wait_s
            while True:
                notice.clear()
                page = await self.store.calls.commands(call, after)
                left = until - asyncio.get_running_loop().time()
                if page.commands or page.state != "open" or left <= 0:
                    return page
                self._polls[call] += 1
                await self.changes.notify()
                try:
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(left):
                            await notice.wait()
                finally:
                    self._polls[call] -= 1
                    if not self._polls[call]:
                        del self._polls[call]
        finally:
            for subscription in subscriptions:
                await subscription.unsubscribe()

    def polling(self, call: str) -> int:
        """Command polls of ``call`` waiting on this replica now (having read none)."""
        return self._polls[call]

    # -- NATS -------------------------------------------------------------------------------

    async def _event(self, what: str, record: CallRecord) -> None:
        event = CallEvent(
            what=what,  # type: ignore[arg-type]
            call=record.call,
            agent=record.agent,
            environment=record.environment,
            room=record.room,
            worker=record.worker,
            outcome=record.outcome,
            cause=record.cause,
            at=db.utcnow(),
        )
        await self.bus.publish(self.bus.subjects.call_event(what, record.call), event)

    async def _appended(self, call: str, last_seq: int) -> None:
        await self.bus.publish(
            self.bus.subjects.appended(call), Appended(call=call, last_seq=last_seq)
        )
