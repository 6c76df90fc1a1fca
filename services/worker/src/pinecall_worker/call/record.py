"""A call's record on the log: opened naming the worker, written through its one writer, ended
with its outcome and sealed (seed 002, "The gateway restarts"; issue 6, "The call").

Invariants:

* One :class:`~pinecall_clients.calllog.CallLogWriter` per call, following on from the offer's
  ``written`` when it carries one; its batches are counted, so a retry never writes twice.
* The writer is flushed at once after each turn and every :data:`FLUSH_EVERY_S` otherwise, on
  the worker's tick (:func:`tick_phase`: its calls' batches go together through its relay), so a
  worker that dies loses at most the last second of what it had not flushed. Nothing the call
  needs lives only in the job's memory: the turns are on the log, the outcome is the log's.
* The open answers what the call runs on (:attr:`Recorder.record`: its agent's version in its
  config), so the job waits for it before it builds its session, but only so long
  (``answer.OPEN_WAIT_S``): past it the worker's defaults answer, and entries wait in the writer
  until the call is open. A job that starts close to its re-offer waits for the open however
  long it takes, and joins only once open (:func:`pinecall_worker.domain.opens_first`): the
  room may be another's.
  Opening retries while nothing answers; a 4xx is final: a 409 means another worker holds the
  call (``on_refused`` is told, so the job leaves), and a call the log refused is answered with
  nothing written.
* The outcome is settled once, by the first event that knows it (:meth:`Recorder.settle`).
* Each error and each measured turn is also a datagram to the worker's minute
  (:func:`pinecall_worker.measures.report`), and the end once the log has it.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import time
import zlib
from collections.abc import Callable
from typing import Any

from pinecall_clients.calllog import SEAL_WITHIN_S, CallLogClient
from pinecall_clients.errors import CallLogError, CallLogRefused
from pinecall_clients.writer import BatchSender
from pinecall_contracts import entries
from pinecall_contracts.calls import CallOpen, CallRecord, EndCause, Outcome, Reopened
from pinecall_contracts.dispatch import JobOffer
from pinecall_contracts.worker import CallEnded, CallError, TurnMeasured
from pinecall_worker.measures import report

_log = logging.getLogger(__name__)

FLUSH_EVERY_S = 1.0
"""Seconds between flushes when no turn asks for one sooner."""
TEXT_MAX = 2000
"""Characters of one text kept on the log."""


def tick_phase(worker: str) -> float:
    """Where in each second ``worker``'s calls flush (0 ≤ phase < :data:`FLUSH_EVERY_S`): one
    clock for a worker's calls, so its relay sends their batches as one request
    (:mod:`pinecall_worker.relay`); another for each worker, so a fleet's requests spread over
    the second rather than meeting at its start."""
    return zlib.crc32(worker.encode()) % 1000 / 1000 * FLUSH_EVERY_S


def to_tick(phase_s: float, now: float | None = None) -> float:
    """Seconds from ``now`` (Unix time) to the next tick at ``phase_s`` in the period, in
    ``(0, FLUSH_EVERY_S]``."""
    left = (phase_s - (time.time() if now is None else now)) % FLUSH_EVERY_S
    return left or FLUSH_EVERY_S


def _ts(unix_s: float | None) -> dt.datetime:
    return dt.datetime.fromtimestamp(unix_s, dt.UTC) if unix_s else dt.datetime.now(dt.UTC)


class Recorder:
    """The log of one call, written from the job that runs it."""

    def __init__(
        self,
        client: CallLogClient,
        offer: JobOffer,
        *,
        worker: str,
        measures: str | None,
        on_refused: Callable[[str], None] = lambda _why: None,
        sender: BatchSender | None = None,
    ) -> None:
        self.client = client
        self.offer = offer
        self.call = offer.call
        self.worker = worker
        self.measures = measures
        self.on_refused = on_refused
        self.writer = client.writer(
            offer.call,
            written=offer.written or 0,
            reopen=Reopened(
                agent=offer.agent,
                org=offer.org,
                room=offer.room,
                worker=worker,
                context=offer.context,
                config=offer.config,
            ),
            sender=sender,
        )
        self._phase_s = tick_phase(worker)
        self.outcome: Outcome | None = None
        self.reason: str | None = None
        self.cause: EndCause | None = None
        """Why a ``drained`` call ended (``EndCause``), settled with the outcome."""
        self.opened = asyncio.Event()
        self.record: CallRecord | None = None
        """The call as the log opened it (its agent's version in its config); None until then."""
        self.refused: str | None = None
        """Why the log refused the call (None while it has not)."""
        self._answered = asyncio.Event()
        """Set once :meth:`_run`'s open is over: opened, refused, or cancelled by :meth:`finish`."""
        self._due = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._ending: asyncio.Task[None] | None = None
        self._ended = False
        """Whether the end is on the log (written once, by :meth:`end_soon` or the finish)."""
        self.ended_at: dt.datetime | None = None
        """When the call ended (:meth:`closed`): its end on the log says it (``CallEnd.at``),
        not the later moment the log hears it, after the last entries and upload."""

    def closed(self) -> None:
        """The call is over now (its session closed, its caller left): the first call fixes
        :attr:`ended_at`."""
        if self.ended_at is None:
            self.ended_at = dt.datetime.now(dt.UTC)

    # ------------------------------------------------------------------ what the call says

    def settle(
        self, outcome: Outcome, reason: str | None = None, *, cause: EndCause | None = None
    ) -> bool:
        """Fix the call's outcome (and a ``drained`` one's ``cause``) unless an earlier event
        already did; True if this one did."""
        if self.outcome is not None:
            return False
        self.outcome, self.reason, self.cause = outcome, reason, cause
        return True

    def add(self, kind: str, data: dict[str, Any], *, at: float | None = None) -> None:
        """Queue an entry (``at``: when it happened, Unix seconds); a turn's is flushed at once."""
        self.writer.add(kind, data, _ts(at))
        if kind in (entries.TURN_USER, entries.TURN_AGENT, entries.TURN_TOOL):
            self._due.set()

    def user_turn(self, text: str, *, stopped_at: float | None, at: float | None) -> None:
        self.add(
            entries.TURN_USER, {"text": text[:TEXT_MAX], "stopped_speaking_at": stopped_at}, at=at
        )

    def agent_turn(
        self, text: str, metrics: dict[str, Any], *, interrupted: bool, at: float
    ) -> None:
        first_audio = metrics.get("e2e_latency")
        self.add(
            entries.TURN_AGENT,
            {
                "text": text[:TEXT_MAX],
                "first_audio_s": first_audio,
                "llm_ttft_s": metrics.get("llm_node_ttft"),
                "tts_ttfb_s": metrics.get("tts_node_ttfb"),
                "interrupted": interrupted,
            },
            at=at,
        )
        if first_audio is not None:
            report(self.measures, TurnMeasured(call=self.call, first_audio_s=first_audio))

    def command_refused(self, command: str, kind: str, why: str) -> None:
        """The session refused the app's command ``command`` (its id): a ``call.error`` entry,
        not a datagram to the worker's minute (the app's command failed, not the worker)."""
        data = {"source": "command", "what": why[:TEXT_MAX], "recoverable": True}
        self.add(entries.CALL_ERROR, data | {"id": command, "kind": kind})
        self._due.set()

    def error(self, source: str, what: str, *, recoverable: bool, at: float | None = None) -> None:
        self.add(
            entries.CALL_ERROR,
            {"source": source, "what": what[:TEXT_MAX], "recoverable": recoverable},
            at=at,
        )
        report(self.measures, CallError(call=self.call, what=what[:200]))
        self._due.set()

    # ------------------------------------------------------------------ open, flush, finish

    def start(self) -> None:
        """Open the call (a ``sentence`` job's is open already) and flush on the cadence until
        :meth:`finish`."""
        if self.offer.job != "answer":
            self.opened.set()
        self._task = asyncio.create_task(self._run(), name=f"record {self.call}")

    async def _open(self) -> bool:
        body = CallOpen(
            call=self.call,
            agent=self.offer.agent,
            org=self.offer.org,
            environment=self.offer.environment,
            room=self.offer.room,
            worker=self.worker,
            context=self.offer.context
            | {"caller": self.offer.caller, "offer": self.offer.attempt}
            | ({"number": self.offer.number} if self.offer.number else {}),
            config=self.offer.config,
        )
        try:
            self.record = await self.client.open(body, within_s=None)
        except CallLogRefused as exc:
            self.refused = str(exc)
            _log.error("call %s: the log refused it (%s); nothing is written", self.call, exc)
            self.on_refused(self.refused)
            return False
        self.opened.set()
        return True

    async def open_settled(self) -> bool:
        """Wait until the log opened the call (True) or refused it (False: another agent holds
        it, and ``on_refused`` was told). Retries while nothing answers, as the open does."""
        if not self.opened.is_set():
            await self._answered.wait()
        return self.opened.is_set()

    async def _run(self) -> None:
        try:
            if not self.opened.is_set() and not await self._open():
                return
        finally:
            self._answered.set()  # whatever ended the open, nobody waits on it past here
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(to_tick(self._phase_s)):  # the tick, or a turn
                    await self._due.wait()
            self._due.clear()
            try:
                await self.writer.flush()
            except CallLogRefused as exc:  # a 409 is the writer's; this is the call refused
                self.refused = str(exc)
                _log.error(
                    "call %s: the log refuses its entries (%s); none is written", self.call, exc
                )
                return

    def end_soon(self, outcome: Outcome, reason: str | None = None) -> None:
        """Write what is queued and the call's end now, in a task of its own, while the job
        closes its session (livekit-agents closes it before the shutdown callbacks run: 2 s
        measured here). The call's seat is free as soon as its end is on the log, so the next
        caller is not refused meanwhile (issue 14, item 5). What the session says while it
        closes is written after the end (an ended call takes entries until it is sealed), and
        :meth:`finish` seals."""
        self.settle(outcome, reason)
        self.closed()
        if self._ending is None and self.refused is None:
            self._ending = asyncio.create_task(self._end_now(), name=f"end-{self.call}")

    async def _end_now(self) -> None:
        await self._answered.wait()  # a caller may leave while the call opens
        if not self.opened.is_set() or self.refused is not None:
            return
        if self._task is not None:
            # cancelling a flush is safe: its batch stays pending and goes again unchanged
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await self._close_log(seal=False)

    async def finish(
        self,
        outcome: Outcome,
        reason: str | None = None,
        *,
        seal: bool = True,
        cause: EndCause | None = None,
    ) -> None:
        """Settle ``outcome`` unless one is settled, write what is queued, end and seal.

        Bounded: the queue gets :data:`SEAL_WITHIN_S` to drain, the end and the seal their own
        30 s each (the client's). Tells the worker's minute how the call ended either way.
        """
        self.settle(outcome, reason, cause=cause)
        assert self.outcome is not None
        if self._ending is not None:
            # done long since, as a rule; one still waiting for the open, or cut short here,
            # leaves the rest to this finish (a drain and an end are idempotent on the log)
            self._ending.cancel()
            await asyncio.gather(self._ending, return_exceptions=True)
        if self._task is not None:
            # cancelling a flush is safe: its batch stays pending and goes again unchanged
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self.refused is not None and not self.opened.is_set():
            return  # not this worker's call: another holds it, or the log would not open it
        try:
            if self.refused is None:
                await self._close_log(seal=seal)
        finally:
            self._report_end()  # the minute counts a call's end once, whoever says it first

    def _report_end(self) -> None:
        assert self.outcome is not None
        failed = self.outcome == "failed"
        report(self.measures, CallEnded(call=self.call, outcome=self.outcome, failed=failed))

    async def _close_log(self, *, seal: bool) -> None:
        assert self.outcome is not None
        try:
            async with asyncio.timeout(SEAL_WITHIN_S):
                if not self.opened.is_set() and not await self._open():
                    return
                await self.writer.drain()
        except (TimeoutError, CallLogError) as exc:
            _log.error(
                "call %s: %d entries not written before the end: %r",
                self.call,
                self.writer.queued,
                exc,
            )
        try:
            if not self._ended:
                await self.client.end(
                    self.call, self.outcome, self.reason, cause=self.cause, at=self.ended_at
                )
                self._ended = True
            # the seat is free from here (the dispatcher hears call.ended now), not once sealed
            self._report_end()
            if seal:
                await self.client.seal(self.call)
        except CallLogError as exc:
            _log.error("call %s: not ended %s on the log: %s", self.call, self.outcome, exc)
