"""What the stand-in did, as an ordered log tests and the lab can await.

Every fact the dispatcher, the rooms and the webhook queues produce is appended here as a small
frozen dataclass; `EventLog.wait_for` resolves when a matching event exists (already or later), so
tests await events instead of sleeping. The log is the stand-in's own (LiveKit has no equivalent).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

E = TypeVar("E")


@dataclass(frozen=True, kw_only=True)
class WorkerRegistered:
    worker_id: str
    agent_name: str


@dataclass(frozen=True, kw_only=True)
class WorkerDeregistered:
    worker_id: str
    agent_name: str


@dataclass(frozen=True, kw_only=True)
class LinkFaulted:
    """A worker's link met a fault: ``cut`` (its socket dropped), ``refused`` (a reconnect under
    a cut, turned away), ``hung`` (its socket hung), ``held`` (a register under a hang, held
    unanswered) or ``lifted`` (the fault's end)."""

    agent_name: str
    what: str


@dataclass(frozen=True, kw_only=True)
class WorkerStatusReported:
    worker_id: str
    status: int
    """`livekit.WorkerStatus` value."""
    load: float
    job_count: int


@dataclass(frozen=True, kw_only=True)
class JobOffered:
    job_id: str
    room: str
    worker_id: str


@dataclass(frozen=True, kw_only=True)
class OfferAnswered:
    job_id: str
    worker_id: str
    answer: str
    """One of ``accepted``, ``declined``, ``terminated``, ``timeout``, ``worker_closed``."""


@dataclass(frozen=True, kw_only=True)
class JobRequestEnded:
    """The end of one psrpc `JobRequest`: ``outcome`` is ``assigned``, ``terminated`` (the worker
    answered terminate=true), ``no_worker`` (agent name not registered: the dispatch stays pending),
    ``no_servers`` (node gate 0), ``exhausted`` (every worker declined) or ``timeout``."""

    job_id: str
    room: str
    dispatch_id: str
    agent_name: str
    outcome: str
    worker_id: str = ""


@dataclass(frozen=True, kw_only=True)
class JobStatusChanged:
    job_id: str
    worker_id: str
    status: int
    """`livekit.JobStatus` value."""
    error: str = ""


@dataclass(frozen=True, kw_only=True)
class DispatchCreated:
    """A dispatch made by CreateDispatch (not the ones a room's creation makes)."""

    room: str
    dispatch_id: str
    agent_name: str
    metadata: str
    at: float = field(default_factory=time.time)
    """When the stand-in received it (Unix seconds)."""


@dataclass(frozen=True, kw_only=True)
class ParticipantJoined:
    room: str
    identity: str
    kind: int
    """`ParticipantInfo.Kind` value."""


@dataclass(frozen=True, kw_only=True)
class ParticipantLeft:
    room: str
    identity: str
    kind: int
    reason: int
    """`DisconnectReason` value."""
    at: float = field(default_factory=time.time)
    """When the stand-in let it go and queued its webhook (Unix seconds)."""


@dataclass(frozen=True, kw_only=True)
class RoomFinished:
    room: str


@dataclass(frozen=True, kw_only=True)
class SipCallStarted:
    """A SIP leg began: ``direction`` ``inbound`` (a phone rang a trunk's number and its rule made
    ``room``) or ``outbound`` (CreateSIPParticipant dialled ``to_number``)."""

    call_id: str
    direction: str
    room: str
    identity: str
    from_number: str
    to_number: str
    trunk_id: str = ""
    rule_id: str = ""
    at: float = field(default_factory=time.time)


@dataclass(frozen=True, kw_only=True)
class SipCallEnded:
    """An outbound leg ended. ``how``: ``hangup`` (the callee's BYE), ``media_timeout`` (no
    media for the timeout: a lost BYE or stopped RTP), ``removed`` (the room let it go),
    ``no_answer`` (rang past the ringing timeout), ``rejected`` (a final SIP failure);
    ``sip_status`` the final answer's code (200 once answered, 0 if none came)."""

    call_id: str
    room: str
    how: str
    sip_status: int
    answered: bool
    reason: int
    """The participant's `DisconnectReason` value."""
    at: float = field(default_factory=time.time)


@dataclass(frozen=True, kw_only=True)
class WebhookDelivered:
    event_id: str
    event: str
    url: str
    status: int


@dataclass(frozen=True, kw_only=True)
class WebhookDropped:
    event_id: str
    event: str
    url: str
    why: str


async def first_of(*waits: Awaitable[Any]) -> None:
    """Return once any of ``waits`` is done; the others are cancelled."""
    futures = [asyncio.ensure_future(w) for w in waits]
    try:
        await asyncio.wait(futures, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for f in futures:
            f.cancel()
        await asyncio.gather(*futures, return_exceptions=True)


class EventLog:
    """Append-only list of events with awaitable matching (one event loop)."""

    def __init__(self) -> None:
        self.events: list[Any] = []
        self._waiters: list[asyncio.Future[None]] = []
        self._listeners: list[Callable[[Any], None]] = []

    def listen(self, listener: Callable[[Any], None]) -> None:
        """Call ``listener`` with every event appended from now on (a load that waits for many
        events at once: each waiter of `wait_for` reads the whole log on every event)."""
        self._listeners.append(listener)

    def append(self, event: Any) -> None:
        """Record `event`, tell the listeners and wake every waiter."""
        self.events.append(event)
        for listener in self._listeners:
            listener(event)
        waiters, self._waiters = self._waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    def of(self, kind: type[E], where: Callable[[E], bool] = lambda _: True) -> list[E]:
        """Every recorded event of `kind` matching `where`, in order."""
        return [e for e in self.events if isinstance(e, kind) and where(e)]

    async def wait_for(
        self, kind: type[E], where: Callable[[E], bool] = lambda _: True, *, count: int = 1
    ) -> list[E]:
        """Wait until `count` events of `kind` match `where`; returns the first `count`.
        Callers bound the wait with `asyncio.timeout` (no deadline is imposed here)."""
        while len(found := self.of(kind, where)) < count:
            fut = asyncio.get_running_loop().create_future()
            self._waiters.append(fut)
            await fut
        return found[:count]
