"""The calls the worker's jobs hold, as its main process knows them (from each job's metadata).

A job process that dies — killed, out of memory, a crash under the framework — runs no shutdown
of its own, so its call would stay open on the log with nobody answering. The main process hears
of every job from livekit-agents' process pool (``ProcPool`` events ``process_job_launched`` and
``process_closed``; ``livekit/agents/ipc/proc_pool.py`` ``launch_job`` and
``_monitor_process_task``). It reads each job's offer as the job does (``pinecall_worker.offer``),
and when a job's process closes with a failure (exit code not 0: ``JobStatus.FAILED``,
``ipc/job_proc_executor.py`` ``_supervise_task``) it ends the call ``failed`` on the log with the
exit code as the reason, and counts the call in the minute. It leaves the call unsealed: the
runtime may still send a sentence job into the room, which writes after the dead job's count and
seals. A job whose process exited cleanly ran its own shutdown, which ended its call.

Past the drain timeout the worker closes its jobs (each ends its own call ``drained``, cause
``shutdown``, and seals it); the calls it held are then sealed ``drained`` (cause
``drain_timeout``) from here (:meth:`HeldCalls.seal`), which
changes nothing on a call its job sealed and closes one whose job was killed.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from livekit.agents.ipc.job_executor import JobStatus

from pinecall_clients.calllog import CallLogClient
from pinecall_clients.errors import CallLogError
from pinecall_contracts.calls import EndCause, Outcome
from pinecall_contracts.dispatch import JobOffer
from pinecall_worker.measures import MeasuresSocket
from pinecall_worker.offer import offer_of_job

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Held:
    """A running job and the call it holds; ``pid`` is its process's (None in a thread)."""

    job_id: str
    offer: JobOffer
    pid: int | None


class HeldCalls:
    """Every running job's call; ends the call of a job whose process died."""

    def __init__(
        self,
        client: CallLogClient | None,
        measures: MeasuresSocket,
        *,
        fleet: str,
        environment: str,
    ) -> None:
        self.client = client
        self.measures = measures
        self.fleet = fleet
        self.environment = environment
        self.fallback: Outcome = "failed"
        """The outcome of a call whose job's process died: ``drained`` while the worker closes
        its jobs past the drain timeout."""
        self.fallback_cause: EndCause | None = None
        """The :attr:`fallback`'s cause: ``drain_timeout`` beside ``drained``."""
        self.ended: deque[tuple[str, Outcome, str]] = deque(maxlen=100)
        """(call, outcome, reason) of the last calls this main process ended."""
        self.changed = asyncio.Event()
        """Set when a job starts or ends, and when a call is ended here (cleared by waiters)."""
        self.on_change: Callable[[], None] | None = None
        """Called at each change that sets :attr:`changed`."""
        self._held: dict[str, Held] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def attach(self, pool: Any) -> None:
        """Hear ``pool``'s jobs (the AgentServer's ``ProcPool``, made when it starts)."""
        pool.on("process_job_launched", self._launched)
        pool.on("process_closed", self._closed)

    def _changed(self) -> None:
        self.changed.set()
        if self.on_change is not None:
            self.on_change()

    def calls(self) -> list[Held]:
        """The jobs running now, each with its call."""
        return list(self._held.values())

    def _launched(self, proc: Any) -> None:
        info = proc.running_job
        if info is None:
            return
        job = info.job
        read = offer_of_job(
            job.metadata,
            job_id=job.id,
            room=job.room.name,
            fleet=self.fleet,
            environment=self.environment,
            now=dt.datetime.now(dt.UTC),
        )
        self._held[job.id] = Held(job.id, read.offer, getattr(proc, "pid", None))
        self._changed()

    def _closed(self, proc: Any) -> None:
        info = proc.running_job
        held = self._held.pop(info.job.id, None) if info is not None else None
        if held is None:
            return
        self._changed()
        try:
            status = proc.status
        except RuntimeError:  # a process that never ran its job has no status
            return
        if status is JobStatus.FAILED:
            exitcode = getattr(proc, "exitcode", None)
            reason = f"the job's process exited with code {exitcode}"
            _log.error("call %s: %s; ending it %s", held.offer.call, reason, self.fallback)
            task = asyncio.create_task(self._end(held, self.fallback, reason, self.fallback_cause))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _end(
        self, held: Held, outcome: Outcome, reason: str, cause: EndCause | None = None
    ) -> None:
        call = held.offer.call
        if held.offer.job == "answer":
            self.measures.call_ended(call, outcome == "failed")
        try:
            if self.client is not None:
                await self.client.end(call, outcome, reason, cause=cause)
                if held.offer.job == "sentence":
                    await self.client.seal(call)
        except CallLogError as exc:  # an ended or sealed call keeps what it has
            _log.error("call %s: not ended %s on the log: %s", call, outcome, exc)
        self.ended.append((call, outcome, reason))
        self._changed()

    async def seal(self, held: list[Held], outcome: Outcome, cause: EndCause | None = None) -> None:
        """Seal every call of ``held`` (``outcome`` and ``cause`` for one still open);
        idempotent on the log."""
        if self.client is None:
            return
        client = self.client

        async def one(h: Held) -> None:
            try:
                await client.seal(h.offer.call, outcome, cause=cause)
            except CallLogError as exc:
                _log.error("call %s: not sealed: %s", h.offer.call, exc)

        await asyncio.gather(*(one(h) for h in held))

    async def aclose(self, within_s: float | None = None) -> None:
        """Wait for the calls being ended here; past ``within_s`` seconds, give them up."""
        try:
            async with asyncio.timeout(within_s):
                while self._tasks:
                    await asyncio.gather(*self._tasks, return_exceptions=True)
        except TimeoutError:
            _log.error("%d calls not ended on the log in time", len(self._tasks))
            for task in self._tasks:
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
