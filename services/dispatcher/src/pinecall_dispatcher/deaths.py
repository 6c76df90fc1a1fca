"""A worker that dies (seed 000, "A worker that dies"; issue 8): its callers hear the overflow's
sentence, never silence.

LiveKit says an agent left its room without a goodbye (``participant_left`` of an ``AGENT`` with
a reason LiveKit does not count as on purpose, :func:`domain.agent_lost`). For each row of that
room the lost worker holds opened, in order:

1. **Ask.** Is the caller still in the room (ListParticipants, by the row's caller identity)? Is
   the call still open (or ended ``failed`` by a worker whose job's process died, and not
   sealed), and what count did the log's head keep from the dead worker's writer
   (``GET /v1/calls/{call}``: ``state``, ``outcome``, ``written``)? :func:`domain.sentence_due`
   decides.
2. **Take.** The row goes back into offers as a ``sentence`` room after ``written`` entries, its
   ``tried`` starting with the lost worker (:meth:`RoomStore.lost`), by the update that finds the
   row still opened by that worker: a duplicate or reordered webhook, or another replica, takes
   nothing. From here on the room is the sweep's too: a replica that stops now leaves it offered
   by the next sweep, and the sentence job ends the call itself.
3. **End** the call ``drained`` (cause ``lost_agent``) through call-log (the seed: the sentence
   is said after ``call.ended`` is on the log).
4. **Offer** the sentence at once, like any call (:meth:`Offering.sweep`): a worker with a seat,
   never the lost one; the overflow when the fleet is full; a fleet nobody else is heard from
   waits.
5. **Call back** a phone caller (``POST /v1/callbacks`` with the number, once per call); a web
   visitor gets none.
6. **Journal** one line: ``room <call>: agent of <worker> lost (CONNECTION_TIMEOUT): ended
   drained, a call back for +1555…, sentence offered to <fleet>/<worker>``.

A log that does not answer within :data:`LOG_WITHIN_S` does not keep the caller in silence: the
sentence is offered (its job reads the count itself, or says it anyway), and what could not be
written is logged. Errors of Postgres before the take leave the event to be delivered again.
"""

from __future__ import annotations

import logging

import msgspec

from pinecall_clients.calllog import CallLogClient
from pinecall_clients.errors import CallLogError, CallUnknown, LiveKitError
from pinecall_clients.livekit import LiveKit, RoomGone
from pinecall_contracts.calls import CallEnd, CallRecord, callback_of
from pinecall_contracts.livekit import LiveKitEvent
from pinecall_dispatcher import domain
from pinecall_dispatcher.offering import Offering
from pinecall_dispatcher.store import RoomRow, Store
from pinecall_servicekit.db import utcnow
from pinecall_servicekit.errors import PinecallError

_log = logging.getLogger(__name__)

LOG_WITHIN_S = 5.0
"""Seconds the handler retries call-log (reading the call, ending it) before it goes on without
it: the caller waits in silence meanwhile (``shared/DESIGN.md``'s back-off, 0.5 s to 5 s)."""
REASON = "the agent's connection was lost"
NOT_ENDED = "not ended (the log did not answer)"


class Lost(msgspec.Struct, frozen=True, kw_only=True):
    """What the handler did with one room, as its journal line says it."""

    worker: str
    reason: str
    ended: str
    """``ended drained``, ``already ended (<outcome>)``, or why not."""
    callback: str | None
    sentence: str
    """``offered to <worker>``, ``to the overflow <fleet>/overflow``, or why it waits."""

    def journal(self, room: str) -> str:
        """``room <call>: agent of <worker> lost (<reason>): ended drained, a call back for
        <number>, sentence offered to <worker>``."""
        done = [self.ended]
        if self.callback:
            done.append(f"a call back for {self.callback}")
        done.append(f"sentence {self.sentence}")
        return f"room {room}: agent of {self.worker} lost ({self.reason}): " + ", ".join(done)


class Deaths:
    """The death handler: rooms whose agent was lost get the sentence (the steps above)."""

    def __init__(self, store: Store, offering: Offering, call_log: CallLogClient) -> None:
        self.store, self.offering, self.call_log = store, offering, call_log

    async def lost(
        self, event: LiveKitEvent, room_sid: str | None, worker: str, livekit: LiveKit
    ) -> list[Lost]:
        """Handle the rows of ``event``'s room that ``worker`` held opened; what was done with
        each that got the sentence (none for a duplicate, or a call over, or a caller gone)."""
        assert event.room is not None
        reason = event.disconnect_reason or "no reason said"
        rows = await self.store.rooms.of_worker(event.environment, event.room, room_sid, worker)
        done = []
        for row in rows:
            lost = await self._room(row, worker, reason, livekit)
            if lost is not None:
                done.append(lost)
        return done

    async def _room(self, row: RoomRow, worker: str, reason: str, livekit: LiveKit) -> Lost | None:
        here = await self._caller_here(row, livekit)
        record, state = await self._record(row.call)
        outcome = record.outcome if record is not None else None
        if not domain.sentence_due(row.job, state, outcome, here):
            _log.info(
                "room %s: agent of %s lost (%s); no sentence: call %s, caller %s",
                row.call,
                worker,
                reason,
                state or "unknown to a log that did not answer",
                "there" if here else "gone",
            )
            return None
        written = record.written if record is not None else None
        count = "an unknown count of" if written is None else str(written)
        line = (
            f"room {{call}}: agent of {worker} lost ({reason}): kept in offers for the "
            f"sentence after {count} entries"
        )
        taken = await self.store.rooms.lost(utcnow(), row.call, worker, written, line)
        if taken is None:
            return None  # a duplicate, or another replica took it first
        # an open call is ended drained; one ended already keeps its outcome (its worker's, or
        # the first loss's); one the log did not say is left to the sentence job, which ends it
        if state == "open":
            ended = "ended drained" if await self._end(row.call) else NOT_ENDED
        else:
            ended = f"already ended ({outcome})" if state == "ended" else NOT_ENDED
        sentence = await self._offer(taken)
        callback = (
            await self._call_back(taken) if domain.calls_back(row.caller, row.number) else None
        )
        lost = Lost(worker=worker, reason=reason, ended=ended, callback=callback, sentence=sentence)
        journal = lost.journal(row.call)
        _log.warning(journal, extra={"call": row.call, "fleet": row.fleet})
        await self.store.rooms.note(taken, journal, utcnow())
        return lost

    async def _caller_here(self, row: RoomRow, livekit: LiveKit) -> bool:
        """Whether the row's caller is still in the room (ListParticipants). A LiveKit that does
        not answer cannot say the caller left: the caller counts as there."""
        try:
            people = await livekit.participants(row.room)
        except RoomGone:
            return False
        except LiveKitError as exc:
            _log.warning(
                "room %s: who is in it unknown (%s); the caller counts as there", row.call, exc
            )
            return True
        callers = [p for p in people if p.kind in domain.CALLER_KINDS]
        if row.caller_identity:
            return any(p.identity == row.caller_identity for p in callers)
        return bool(callers)

    async def _record(self, call: str) -> tuple[CallRecord | None, domain.LogState | None]:
        """The call on call-log and its state; ``(None, None)`` when the log did not answer."""
        try:
            record = await self.call_log.record(call, within_s=LOG_WITHIN_S)
        except CallUnknown:
            return None, "unknown"
        except CallLogError as exc:
            _log.error(
                "call %s: the log did not answer (%s); the caller is not left silent", call, exc
            )
            return None, None
        return record, record.state

    async def _end(self, call: str) -> bool:
        """End the call ``drained`` (cause ``lost_agent``); False when the log did not take it
        (the sentence job ends it then)."""
        try:
            await self.call_log.request(
                f"/v1/calls/{call}/end",
                CallEnd(outcome="drained", reason=REASON, cause="lost_agent"),
                CallRecord,
                within_s=LOG_WITHIN_S,
            )
        except CallLogError as exc:
            _log.error("call %s: not ended drained (%s); its sentence job ends it", call, exc)
            return False
        return True

    async def _offer(self, row: RoomRow) -> str:
        """Offer the room's sentence now (the fleet's sweep); where it went, as the journal
        says it."""
        try:
            await self.offering.sweep(row.fleet)
            now = await self.store.rooms.get(row.call)
        except (PinecallError, LiveKitError) as exc:
            _log.warning(
                "room %s: the sentence not offered yet (%s); the sweep offers it", row.call, exc
            )
            return "kept in offers for the next sweep"
        if now is None or now.state == "ended":
            return "not offered: the room ended"
        if now.state == "overflow":
            return f"to the overflow {now.worker}"
        if now.state == "opened":
            return f"taken by {now.worker}"
        if now.worker is not None:
            return f"offered to {now.worker}"
        return f"waits for a worker of {row.fleet} to be heard"

    async def _call_back(self, row: RoomRow) -> str | None:
        """``callback.requested`` on the agent's log with the caller's number (once per call);
        the number, or None when the log did not take it."""
        assert row.number is not None
        request = callback_of(row.agent, row.number, reason=REASON, call=row.call)
        try:
            await self.call_log.callback(request, environment=row.environment)
        except CallLogError as exc:
            _log.error("call %s: no call back written for %s: %s", row.call, row.number, exc)
            return None
        return row.number
