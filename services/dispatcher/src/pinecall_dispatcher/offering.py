"""Offering rooms: decide under the fleet's lock, dispatch after the commit, confirm.

1. **Decide and take.** In one transaction holding the fleet's lock: the seats promised to each
   worker (offered and held), the fleet's rows (at most a second old), the rules
   (:func:`domain.sweep`); each offer or overflow is taken by the update that finds the count it
   read, and journaled.
2. **Dispatch.** A re-offer first asks the room's dispatches (ListDispatch): a room that is gone
   ends there (a dispatch would make it again), and every earlier dispatch of the call is deleted,
   so a late accept never puts two agents in one room. Then CreateDispatch to the worker's LiveKit
   name, or to ``<fleet>/overflow``, with the :class:`JobOffer` as its metadata.
3. **Confirm.** The dispatch's id is recorded; if the room ended meanwhile (the caller hung up),
   the dispatch is deleted again.

A LiveKit that does not answer leaves the offer taken and unconfirmed: the room is offered again
after the re-offer time, like an offer nobody opened.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import Literal

import msgspec

from pinecall_contracts.base import decode, encode
from pinecall_contracts.dispatch import JobOffer
from pinecall_dispatcher import domain
from pinecall_dispatcher.livekit import LiveKit, LiveKits, LiveKitUnavailable, RoomGone
from pinecall_dispatcher.metrics import Metrics
from pinecall_dispatcher.roster import RosterView
from pinecall_dispatcher.settings import DispatcherSettings
from pinecall_dispatcher.store import RoomRow, Store
from pinecall_servicekit.changes import Changes
from pinecall_servicekit.db import utcnow

_log = logging.getLogger(__name__)
Outcome = Literal["dispatched", "room_gone", "unavailable", "withdrawn"]
"""What became of an offer taken: its dispatch made; the room gone (ended, no dispatch); LiveKit
did not answer (offered again later); the room ended meanwhile (the dispatch deleted again)."""


def job_offer(row: RoomRow) -> JobOffer:
    """The job a dispatch of ``row`` carries; the overflow's offer is the one after the last."""
    assert row.arrived_at is not None
    return JobOffer(
        call=row.call,
        fleet=row.fleet,
        environment=row.environment,
        room=row.room,
        offer=len(row.tried) + (1 if row.state == "overflow" else 0),
        job=row.job,  # type: ignore[arg-type]  # the column holds a JobKind
        agent=row.agent,
        org=row.org,
        caller=row.caller,  # type: ignore[arg-type]  # the column holds a CallerKind
        number=row.number,
        written=row.written,
        arrived_at=row.arrived_at,
        context=row.context,
        config=row.config,
    )


def offer_of(metadata: str) -> JobOffer | None:
    """The JobOffer a dispatch's metadata carries, or None (not one of the dispatcher's)."""
    try:
        return decode(metadata, JobOffer) if metadata else None
    except msgspec.MsgspecError:
        return None


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

    async def ring(self, call: str, fleet: str, livekit: LiveKit) -> None:
        """Offer the room of ``call`` at once: a caller just arrived (its dispatches were read)."""
        await self._offer(fleet, call=call, fresh=livekit)

    async def sweep(self, fleet: str) -> None:
        """Offer every room of ``fleet`` whose time came."""
        await self._offer(fleet)

    async def _offer(
        self, fleet: str, *, call: str | None = None, fresh: LiveKit | None = None
    ) -> None:
        rows = await self.roster.rows(fleet)
        now = utcnow()
        taken: list[RoomRow] = []
        async with self.store.offers.fleet(fleet, now) as tx:
            offered, held = await tx.promised(self.settings.max_call_s)
            pending = domain.not_counted(rows, offered, held)
            due = {
                r.call: r for r in await tx.due(self.settings.sweep_s, self.rules.reoffer_s, call)
            }
            rooms = [
                domain.Room(
                    name=r.call,
                    arrived_at=r.arrived_at.timestamp() if r.arrived_at else now.timestamp(),
                    tried=tuple(r.tried),
                    offered_at=r.offered_at.timestamp() if r.offered_at else None,
                )
                for r in due.values()
            ]
            for room, decision in domain.sweep(rooms, rows, pending, now.timestamp(), self.rules):
                row = due[room.name]
                if isinstance(decision, domain.Offer):
                    line = decision.journal(row.call)
                    done = await tx.offer(row, decision.worker, line)
                elif isinstance(decision, domain.Overflow):
                    name = domain.overflow_name(fleet)
                    line = decision.journal(row.call, name, len(row.tried))
                    done = await tx.overflow(row, name, decision.reason, decision.waited, line)
                else:
                    continue
                if done is not None:
                    _log.info(line, extra={"call": row.call, "fleet": fleet})
                    self.metrics.offer(fleet, decision)
                    taken.append(done)
        await asyncio.gather(*(self._dispatch(r, fresh if r.call == call else None) for r in taken))

    async def _dispatch(self, row: RoomRow, fresh: LiveKit | None) -> None:
        try:
            livekit = fresh or await self._livekit(row)
            if fresh is None:
                for d in await livekit.dispatches(row.room):
                    earlier = offer_of(d.metadata)
                    if earlier is not None and earlier.call == row.call:
                        await livekit.delete_dispatch(row.room, d.id)
            assert row.worker is not None
            dispatch = await livekit.create_dispatch(
                row.room, row.worker, encode(job_offer(row)).decode()
            )
        except RoomGone:
            await self.store.rooms.ended(utcnow(), row.call, "room_gone")
            await self._outcome(row, "room_gone")
            return
        except LiveKitUnavailable as exc:
            _log.warning("room %s: not dispatched (%s); offered again later", row.call, exc)
            await self._outcome(row, "unavailable")
            return
        confirmed = await self.store.offers.confirm(row.call, len(row.tried), dispatch)
        if confirmed is None or confirmed.state == "ended":
            await livekit.delete_dispatch(row.room, dispatch)
            await self._outcome(row, "withdrawn")
            return
        await self._outcome(row, "dispatched")

    async def _outcome(self, row: RoomRow, outcome: Outcome) -> None:
        self.outcomes.append((row.call, outcome))
        await self.changes.notify()

    async def _livekit(self, row: RoomRow) -> LiveKit:
        record = await self.roster.fleet(row.fleet)
        if record is None:
            raise LiveKitUnavailable(f"no fleets row names {row.fleet}")
        return self.livekits.of(row.environment, record.livekit_url)
