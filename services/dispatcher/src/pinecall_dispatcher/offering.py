"""Offering rooms: decide under the fleet's lock, dispatch after the commit, confirm.

1. **Decide and take.** In one transaction holding the fleet's lock: the rooms that just arrived
   are kept in offers, the seats promised to each worker read (offered and held), the fleet's rows
   (at most a second old), the rules (:func:`domain.sweep`); each offer or overflow is taken by
   the update that finds the count it read, and journaled. Rooms that ring while a batch is being
   decided are decided together in the next one (one transaction for many, under a burst).
2. **Dispatch.** A room that just arrived is dispatched only if its caller is still in it (read
   after its row was written, so a hang-up handled meanwhile is never missed); an outbound
   call's callee is not in it until its job dials, so its room is read as a re-offer's is. A re-offer first
   asks the room's dispatches (ListDispatch): a room that is gone ends there (a dispatch would make
   it again), and every earlier dispatch of the call is deleted, so a late accept never puts two
   agents in one room. Then CreateDispatch to the worker's LiveKit name, or to
   ``<fleet>/overflow``, with the :class:`JobOffer` as its metadata.
3. **Confirm.** The dispatches' ids are recorded; a room that ended meanwhile (the caller hung
   up) has its dispatch deleted again.

A LiveKit that does not answer leaves the offer taken and unconfirmed: the room is offered again
after the re-offer time, like an offer nobody opened.

Each CreateDispatch is made in the span ``offer`` of the call's trace, whose ``traceparent`` the
JobOffer carries into the job: a batch runs in the task of its fleet, made by whichever ring came
first, so the call's context is taken from its environment and room
(:func:`pinecall_servicekit.calltrace.call_context`), never from the task.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections import deque
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Literal

import msgspec
from opentelemetry import trace

from pinecall_clients.errors import LiveKitError
from pinecall_clients.livekit import LiveKit, LiveKitUnavailable, RoomGone
from pinecall_contracts.base import decode, encode
from pinecall_contracts.dispatch import JobOffer
from pinecall_contracts.ids import overflow_name
from pinecall_dispatcher import domain
from pinecall_dispatcher.livekit import LiveKits
from pinecall_dispatcher.metrics import Metrics
from pinecall_dispatcher.roster import RosterView
from pinecall_dispatcher.settings import DispatcherSettings
from pinecall_dispatcher.store import Arrival, RoomRow, Store
from pinecall_dispatcher.store.offers import Claim, FleetOffers
from pinecall_dispatcher.store.rows import Taken
from pinecall_servicekit import calltrace
from pinecall_servicekit.changes import Changes
from pinecall_servicekit.db import utcnow

_log = logging.getLogger(__name__)
_tracer = trace.get_tracer(__name__)
Outcome = Literal["dispatched", "room_gone", "caller_gone", "unavailable", "withdrawn"]
NOT_MADE = {
    "room_gone": "the room was gone",
    "caller_gone": "the caller had hung up",
    "unavailable": "LiveKit did not answer; offered again later",
}
"""What became of an offer taken: its dispatch made; the room gone (ended, no dispatch); the
caller gone before the dispatch (ended, no dispatch); LiveKit did not answer (offered again
later); the room ended meanwhile (the dispatch deleted again)."""


def job_offer(row: RoomRow, reoffer_s: float, traceparent: str | None = None) -> JobOffer:
    """The job a dispatch of ``row`` carries; the overflow's offer is the one after the last.
    ``traceparent`` is the offer's span, which the job goes on from (``calltrace``).

    A worker's offer says when the room is offered again unless its call opens (``reoffer_s``
    after this offer); the overflow's says nothing: nothing comes after it.
    """
    assert row.arrived_at is not None
    reoffer_at = (
        row.offered_at + dt.timedelta(seconds=reoffer_s)
        if row.state == "waiting" and row.offered_at is not None
        else None
    )
    return JobOffer(
        call=row.call,
        fleet=row.fleet,
        environment=row.environment,
        room=row.room,
        attempt=len(row.tried) + (1 if row.state == "overflow" else 0),
        job=row.job,  # type: ignore[arg-type]  # the column holds a JobKind
        agent=row.agent,
        org=row.org,
        caller=row.caller,  # type: ignore[arg-type]  # the column holds a CallerKind
        number=row.number,
        written=row.written,
        arrived_at=row.arrived_at,
        context=row.context,
        config=row.config,
        reoffer_at=reoffer_at,
        sip_trunk=row.sip_trunk,
        traceparent=traceparent,
    )


def offer_of(metadata: str) -> JobOffer | None:
    """The JobOffer a dispatch's metadata carries, or None (not one of the dispatcher's)."""
    try:
        return decode(metadata, JobOffer) if metadata else None
    except msgspec.MsgspecError:
        return None


@dataclass
class _Ring:
    arrival: Arrival
    livekit: LiveKit
    done: asyncio.Future[None]


@dataclass
class _Fleet:
    """A fleet's rings waiting for the next batch, and the lock its decisions take here."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    rings: list[_Ring] = field(default_factory=list)
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None


class Offering:
    """Makes the offers of every fleet."""

    def __init__(
        self,
        settings: DispatcherSettings,
        store: Store,
        livekits: LiveKits,
        roster: RosterView,
        metrics: Metrics,
    ) -> None:
        self.settings = settings
        self.rules = settings.rules()
        self.store = store
        self.livekits = livekits
        self.roster = roster
        self.metrics = metrics
        self.outcomes: deque[tuple[str, Outcome]] = deque(maxlen=10_000)
        """``(call, outcome)`` of the newest offers taken here, oldest first."""
        self.changes = Changes()
        """Notified after each outcome."""
        self._fleets: dict[str, _Fleet] = {}
        self._running: set[asyncio.Task[None]] = set()

    async def ring(self, arrival: Arrival, livekit: LiveKit) -> None:
        """Keep the call that just arrived in offers and offer it at once (its dispatches were
        read on ``livekit``); returns once it is dispatched, or left for the sweep to offer."""
        fleet = self._fleet(arrival.fleet)
        ring = _Ring(arrival, livekit, asyncio.get_running_loop().create_future())
        fleet.rings.append(ring)
        fleet.wake.set()
        await ring.done

    async def sweep(self, fleet: str) -> list[Taken]:
        """Offer every room of ``fleet`` whose time came; the offers and overflows taken here."""
        taken = await self._decide(fleet)
        await self._dispatch_all(taken, {})
        return taken

    async def aclose(self) -> None:
        tasks = [f.task for f in self._fleets.values() if f.task] + list(self._running)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _fleet(self, name: str) -> _Fleet:
        fleet = self._fleets.get(name)
        if fleet is None:
            fleet = self._fleets[name] = _Fleet()
            fleet.task = asyncio.create_task(self._batches(name, fleet), name=f"offers-{name}")
        return fleet

    async def _batches(self, name: str, fleet: _Fleet) -> None:
        """Decide the rings of ``name`` a batch at a time; dispatch each batch on its own."""
        while True:
            await fleet.wake.wait()
            fleet.wake.clear()
            rings, fleet.rings = fleet.rings, []
            if not rings:
                continue
            try:
                taken = await self._decide(name, [r.arrival for r in rings])
            except Exception as exc:  # each ring's handler says it (and its event comes again)
                for r in rings:
                    r.done.set_exception(exc)
                continue
            task = asyncio.create_task(self._dispatch_batch(taken, rings))
            self._running.add(task)
            task.add_done_callback(self._running.discard)

    async def _dispatch_batch(self, taken: list[Taken], rings: list[_Ring]) -> None:
        try:
            await self._dispatch_all(taken, {r.arrival.call: r for r in rings})
        except Exception as exc:
            for r in rings:
                if not r.done.done():
                    r.done.set_exception(exc)
            return
        for r in rings:
            if not r.done.done():
                r.done.set_result(None)

    async def _decide(self, fleet: str, arrivals: list[Arrival] | None = None) -> list[Taken]:
        """Decide, under the fleet's lock, the rooms that just arrived (kept and given their
        offer in one statement), or else the rooms the sweep finds due; the offers and
        overflows taken."""
        rows = await self.roster.rows(fleet)
        async with self._fleet(fleet).lock:  # one transaction of the fleet at a time here
            now = utcnow()
            async with self.store.offers.fleet(fleet, now) as tx:
                offered, held = await tx.promised(self.settings.max_call_seconds)
                pending = domain.not_counted(rows, offered, held)
                if arrivals is None:
                    unheld = {r.worker for r in rows if r.agent_name is None}
                    due = {
                        r.call: r
                        for r in await tx.due(self.settings.sweep_s, self.rules.reoffer_s, unheld)
                    }
                    rooms = [self._room(r, now.timestamp(), unheld) for r in due.values()]
                else:
                    rang = {a.call: a for a in arrivals}  # a room twice in one batch: once
                    rooms = [domain.Room(name=c, arrived_at=now.timestamp()) for c in rang]
                decided = dict(
                    (room.name, decision)
                    for room, decision in domain.sweep(
                        rooms, rows, pending, now.timestamp(), self.rules
                    )
                )
                if arrivals is None:
                    taken = await self._take(tx, fleet, due, decided)
                else:
                    taken = await tx.arrive(
                        [(a, self._claim(fleet, c, decided[c], 0)) for c, a in rang.items()]
                    )
        for t in taken:
            _log.info(t.line, extra={"call": t.row.call, "fleet": fleet})
            self.metrics.offered(t.row, decided[t.row.call])
        return taken

    @staticmethod
    def _claim(fleet: str, call: str, decision: domain.Decision, tried: int) -> Claim:
        if isinstance(decision, domain.Offer):
            return Claim(line=decision.journal(call), worker=decision.worker)
        if isinstance(decision, domain.Overflow):
            name = overflow_name(fleet)
            return Claim(
                line=decision.journal(call, name, tried),
                overflow=name,
                reason=decision.reason,
                waited=decision.waited,
            )
        return Claim()

    async def _take(
        self,
        tx: FleetOffers,
        fleet: str,
        due: dict[str, RoomRow],
        decided: dict[str, domain.Decision],
    ) -> list[Taken]:
        """Take the sweep's offers and overflows, each by the update that finds its count."""
        offers, overflows = [], []
        for call, decision in decided.items():
            made = len(due[call].tried) - (due[call].job == "sentence")  # not the lost worker's
            row, claim = due[call], self._claim(fleet, call, decision, made)
            if claim.worker is not None:
                offers.append((row, claim.worker, claim.line))
            elif claim.overflow is not None:
                overflows.append(
                    (row, claim.overflow, claim.reason or "", claim.waited, claim.line)
                )
        return await tx.offer(offers) + await tx.overflow(overflows)

    @staticmethod
    def _room(r: RoomRow, now: float, unheld: Collection[str]) -> domain.Room:
        return domain.Room(
            name=r.call,
            arrived_at=r.arrived_at.timestamp() if r.arrived_at else now,
            tried=tuple(r.tried),
            offered_at=r.offered_at.timestamp() if r.offered_at else None,
            job="sentence" if r.job == "sentence" else "answer",
            unheld=r.offered_at is not None and r.worker in unheld,
        )

    async def _dispatch_all(self, taken: list[Taken], fresh: dict[str, _Ring]) -> None:
        outcomes = await asyncio.gather(
            *(self._dispatch(t.row, fresh.get(t.row.call)) for t in taken)
        )
        made = [(t, o) for t, o in zip(taken, outcomes, strict=True) if not isinstance(o, str)]
        lines = [
            (t, t.line if not isinstance(o, str) else f"{t.line}; not dispatched: {NOT_MADE[o]}")
            for t, o in zip(taken, outcomes, strict=True)
        ]
        states = await self.store.offers.confirm(
            [(t.row.call, len(t.row.tried), d) for t, (d, _) in made], lines
        )
        for t, o in zip(taken, outcomes, strict=True):
            if isinstance(o, str):
                await self._outcome(t.row, o)
        for t, (dispatch, livekit) in made:
            if states.get(t.row.call, "ended") == "ended":
                await livekit.delete_dispatch(t.row.room, dispatch)
                await self._outcome(t.row, "withdrawn")
            else:
                await self._outcome(t.row, "dispatched")

    async def _dispatch(self, row: RoomRow, ring: _Ring | None) -> tuple[str, LiveKit] | Outcome:
        """Make ``row``'s dispatch: ``(dispatch id, its LiveKit)``, or why it was not made."""
        try:
            if ring is not None and ring.arrival.caller != "outbound":
                livekit = ring.livekit
                people = {p.identity for p in await livekit.participants(row.room)}
                if ring.arrival.caller_identity not in people:
                    await self.store.rooms.caller_left(
                        utcnow(),
                        row.environment,
                        row.room,
                        row.room_sid,
                        ring.arrival.caller_identity,
                    )
                    return "caller_gone"
            else:
                # a re-offer; or an outbound call, whose callee joins only once its job dials
                livekit = ring.livekit if ring is not None else await self._livekit(row)
                for d in await livekit.dispatches(row.room):
                    earlier = offer_of(d.metadata)
                    if earlier is not None and earlier.call == row.call:
                        await livekit.delete_dispatch(row.room, d.id)
            assert row.worker is not None
            # in the call's trace, whichever ring's task runs the batch (module docstring)
            with _tracer.start_as_current_span(
                "offer",
                context=calltrace.call_context(row.environment, row.room),
                attributes={
                    calltrace.CALL: row.call,
                    calltrace.ROOM: row.room,
                    "pinecall.worker": row.worker,
                },
            ):
                offer = job_offer(row, self.rules.reoffer_s, calltrace.traceparent())
                dispatch = await livekit.create_dispatch(
                    row.room, row.worker, encode(offer).decode()
                )
        except RoomGone:
            await self.store.rooms.ended(utcnow(), row.call, "room_gone")
            return "room_gone"
        except LiveKitError as exc:  # did not answer, or refused: like an offer nobody opened
            _log.warning("room %s: not dispatched (%s); offered again later", row.call, exc)
            return "unavailable"
        return dispatch, livekit

    async def _livekit(self, row: RoomRow) -> LiveKit:
        record = await self.roster.fleet(row.fleet)
        if record is None:
            raise LiveKitUnavailable(f"no fleets row names {row.fleet}")
        return self.livekits.of(row.environment, record.livekit_url)

    async def _outcome(self, row: RoomRow, outcome: Outcome) -> None:
        self.outcomes.append((row.call, outcome))
        await self.changes.notify()
