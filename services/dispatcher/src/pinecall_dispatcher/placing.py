"""What each LiveKit event and call-log event does to the rooms (seed 000, "Who takes a call").

- ``participant_joined`` of a caller (``STANDARD`` or ``SIP``): read the room's newest dispatch
  on the LiveKit of the event's environment (ListDispatch); one to a fleet's plain name that no
  job took is the call to place: keep the room in offers (its call id is the ring's, or one made
  from the ring's dispatch id) and offer it at once (``Offering.ring``, which reads the caller's
  presence *after* the row is written, so a hang-up handled in between is never missed). A room
  with no such ring whose name a visitor's token was minted for (an ``admitted`` row) is that
  visitor's call: LiveKit applies a token's ring only when the join makes the room, and a page's
  server (or an earlier join) may have made it first.
- Before that, the ring's agent is looked up (:class:`~pinecall_dispatcher.agents.Agents`,
  remembered 5 s: a ring usually costs no round trip). A ring for an agent its org does not
  define in the room's environment (or a ring that names no org: a dispatch whose metadata is no
  ``CallRing``) is **refused** ``unknown_agent``, as the token endpoint refuses it: it is not
  offered to any worker nor to the overflow, its call is kept ``ended`` with that outcome and a
  journal line (``logs CALL`` says why), the refusal is counted (``pinecall_admissions_total``,
  the refusals table ``doctor`` reads), and **the room is taken down at once** (DeleteRoom:
  LiveKit SIP hangs the phone up), so the caller is hung up on within the second rather than
  left ringing in silence. Not the overflow's sentence: it promises a call back nobody could
  make (no app holds an agent that does not exist, and the call back would be refused too), and
  would open a call on the log of an agent that is not there. A LiveKit that does not take the
  room down fails the event, which comes again (the refusal is not counted twice: the row
  decides); past that, the reaper takes down a room no call names.
- ``participant_joined`` of an agent: the room's offers end; the agent's ``lk.agent_name``
  holds the seat.
- ``participant_left`` of a caller: a room not opened yet ends, its dispatch is deleted.
- ``participant_left`` of an agent: an agent lost without a goodbye first goes to the death
  handler (:mod:`.deaths`: its caller gets the sentence); then its seat is free; then, as after a
  hand-over, a person alone in the room with a ring nobody took is a call to place.
- ``room_finished``: every live row of the room ends.
- ``call.opened``: the room's offers end; ``call.ended``: the call ends, its seat is free. A
  written call's row (no room, no seat) is opened and ended the same way, so it leaves the
  org's count when it ends.

Each handler is idempotent: the row decides, so duplicates and reorders change nothing. An event
is read through its contract's fields (the room's sid, the participant's kind and attributes,
lifted by webhook-ingest), never through LiveKit's webhook body.
"""

from __future__ import annotations

import logging
import re
from collections import deque

import msgspec

from pinecall_clients.livekit import Dispatch, LiveKit, Participant, RoomGone
from pinecall_contracts.base import decode
from pinecall_contracts.calls import CallEvent
from pinecall_contracts.dispatch import CallRing
from pinecall_contracts.livekit import LiveKitEvent
from pinecall_dispatcher import domain
from pinecall_dispatcher.admission import UnknownAgent
from pinecall_dispatcher.agents import Agents
from pinecall_dispatcher.deaths import Deaths
from pinecall_dispatcher.livekit import LiveKits
from pinecall_dispatcher.metrics import Metrics
from pinecall_dispatcher.offering import Offering
from pinecall_dispatcher.roster import RosterView
from pinecall_dispatcher.store import Arrival, RoomRow, Store
from pinecall_servicekit.changes import Changes
from pinecall_servicekit.db import utcnow

_log = logging.getLogger(__name__)
AGENT_NAME = "lk.agent_name"
"""The attribute LiveKit puts on an agent's token: its worker's agent name."""
HANDLED = 10_000
PHONE = "sip.phoneNumber"
NUMBER = re.compile(r"\+?[0-9]{3,20}")
"""A caller's number the JobOffer can carry (``dispatch.Number``)."""
REFUSED = UnknownAgent.code
"""The reason of a ring refused at placing: the token endpoint's, for the same refusal."""


def participant_of(event: LiveKitEvent) -> Participant | None:
    """The participant ``event`` names, as the LiveKit adapter names one (LiveKit's kind name,
    its attributes); None when it names none."""
    if event.participant is None or event.participant_kind is None:
        return None
    return Participant(
        identity=event.participant,
        kind=event.participant_kind,
        attributes=event.participant_attributes,
    )


def ring_of(dispatches: list[Dispatch]) -> Dispatch | None:
    """The room's newest dispatch."""
    return max(dispatches, key=lambda d: d.created_at_ns, default=None)


class Placing:
    """Turns events into rooms kept in offers, opened or ended."""

    def __init__(
        self,
        store: Store,
        livekits: LiveKits,
        roster: RosterView,
        offering: Offering,
        deaths: Deaths,
        agents: Agents,
        metrics: Metrics,
    ) -> None:
        self.store, self.livekits, self.roster, self.offering = store, livekits, roster, offering
        self.deaths, self.agents, self.metrics = deaths, agents, metrics
        self.handled: deque[LiveKitEvent] = deque(maxlen=HANDLED)
        """The newest events handled here, oldest first (an operator's and a test's view)."""
        self.handled_calls: deque[CallEvent] = deque(maxlen=HANDLED)
        self.changes = Changes()
        """Notified after each event handled."""

    async def livekit_event(self, event: LiveKitEvent) -> None:
        """Apply one LiveKit event; ``handled`` holds it once applied."""
        await self._apply(event)
        self.handled.append(event)
        await self.changes.notify()

    async def _apply(self, event: LiveKitEvent) -> None:
        if event.room is None or event.event not in (
            "participant_joined",
            "participant_left",
            "room_finished",
        ):
            return
        sid = event.room_sid
        if event.event == "room_finished":
            await self.store.rooms.finished(utcnow(), event.environment, event.room, sid)
            return
        p = participant_of(event)
        if p is None:
            _log.warning("event %s: a %s that names no participant", event.id, event.event)
            return
        caller = p.kind in domain.CALLER_KINDS
        agent = p.kind == "AGENT"
        if event.event == "participant_joined" and caller:
            livekit = await self._livekit(event.environment)
            if livekit is not None:
                await self.place(livekit, event.environment, event.room, sid, p)
        elif event.event == "participant_joined" and agent:
            worker = p.attributes.get(AGENT_NAME)
            if worker:
                self.metrics.opened(
                    await self.store.rooms.opened(
                        utcnow(),
                        worker,
                        environment=event.environment,
                        room=event.room,
                        room_sid=sid,
                    )
                )
        elif event.event == "participant_left" and caller:
            await self._caller_left(event, sid, p)
        elif event.event == "participant_left" and agent:
            worker = p.attributes.get(AGENT_NAME, "")
            livekit = await self._livekit(event.environment)
            if domain.agent_lost(event.disconnect_reason) and worker and livekit is not None:
                await self.deaths.lost(event, sid, worker, livekit)
            await self.store.rooms.agent_left(utcnow(), event.environment, event.room, sid, worker)
            if livekit is not None:
                await self.place(livekit, event.environment, event.room, sid, None)

    async def call_event(self, event: CallEvent) -> None:
        """Apply ``call.opened`` or ``call.ended``; ``handled_calls`` holds it once applied."""
        # a written call (a chat, a WhatsApp thread) has a row of its own, and no room
        await self.store.admissions.written_event(
            event.call, event.what, utcnow(), event.outcome or event.what
        )
        if event.what == "opened":
            self.metrics.opened(
                await self.store.rooms.opened(utcnow(), event.worker, call=event.call)
            )
        else:
            # a dead worker's room lives on past its call's end, until its sentence is said
            await self.store.rooms.ended(
                utcnow(), event.call, event.outcome or event.what, sentence_too=False
            )
        self.handled_calls.append(event)
        await self.changes.notify()

    async def _livekit(self, environment: str) -> LiveKit | None:
        record = await self.roster.fleet_of(environment)
        if record is None:
            _log.warning("no fleet serves environment %s: its rooms are not placed", environment)
            return None
        return self.livekits.of(environment, record.livekit_url)

    async def _caller_left(self, event: LiveKitEvent, sid: str | None, p: Participant) -> None:
        assert event.room is not None
        rows = await self.store.rooms.caller_left(
            utcnow(), event.environment, event.room, sid, p.identity
        )
        livekit = await self._livekit(event.environment) if rows else None
        for row in rows:
            if row.dispatch and livekit is not None:
                await livekit.delete_dispatch(row.room, row.dispatch)

    async def place(
        self,
        livekit: LiveKit,
        environment: str,
        room: str,
        sid: str | None,
        person: Participant | None,
    ) -> None:
        """Keep and offer the room's call if its newest dispatch is a ring nobody took and a
        person is in it (``person``, or, after an agent left, whoever is alone there)."""
        admitted: RoomRow | None = None
        try:
            ring = ring_of(await livekit.dispatches(room))
            if ring is not None and ring.jobs > 0:
                return
            fleet = await self.roster.fleet(ring.agent_name) if ring is not None else None
            if fleet is None or fleet.environment != environment:
                # no ring to a fleet: a visitor whose room was made before its join (LiveKit
                # applies a token's ring only to the join that makes the room) is placed from
                # the admission its token was minted with
                admitted = await self.store.rooms.admitted(environment, room)
                if admitted is None:
                    return
                fleet = await self.roster.fleet(admitted.fleet)
                if fleet is None or fleet.environment != environment:
                    return
                ring = None
            if person is None:
                people = await livekit.participants(room)
                if any(x.kind == "AGENT" for x in people):
                    return
                person = next((x for x in people if x.kind in domain.CALLER_KINDS), None)
                if person is None:
                    return
        except RoomGone:
            return
        if admitted is not None:
            arrival = self._admitted(admitted, sid, person)
        else:
            assert ring is not None
            arrival = self._arrival(ring, fleet.name, environment, room, sid, person)
        if await self.agents.lookup(environment, arrival.org, arrival.agent) == "unknown":
            await self._refuse(arrival, livekit, REFUSED)
            return
        await self.offering.ring(arrival, livekit)

    async def _refuse(self, arrival: Arrival, livekit: LiveKit, reason: str) -> None:
        """Refuse the ring before any offer: the call kept ended with ``reason`` and counted
        once, the room taken down (``LiveKitUnavailable`` when LiveKit does not answer: the
        event comes again)."""
        whose = f"org {arrival.org}" if arrival.org else "no org"
        line = (
            f"room {{call}}: refused ({reason}): no agent {arrival.agent} of {whose} in "
            f"{arrival.environment}; offered to nobody, the room taken down"
        )
        if await self.store.rooms.refused(utcnow(), arrival, reason, line) is not None:
            self.metrics.admissions.labels(arrival.environment, arrival.fleet, reason).inc()
            _log.warning(
                "room %s: a %s caller for agent %s of %s in %s refused (%s): hung up",
                arrival.room,
                arrival.caller,
                arrival.agent,
                whose,
                arrival.environment,
                reason,
            )
        await livekit.delete_room(arrival.room)

    @staticmethod
    def _admitted(row: RoomRow, sid: str | None, person: Participant) -> Arrival:
        """The arrival of the visitor whose token made ``row`` (state ``admitted``)."""
        return Arrival(
            call=row.call,
            environment=row.environment,
            fleet=row.fleet,
            room=row.room,
            room_sid=sid,
            ring=None,
            agent=row.agent,
            org=row.org,
            caller=row.caller,
            caller_identity=person.identity,
            number=None,
            context=row.context,
            config=row.config,
        )

    def _arrival(
        self,
        ring: Dispatch,
        fleet: str,
        environment: str,
        room: str,
        sid: str | None,
        person: Participant,
    ) -> Arrival:
        sip = person.kind == "SIP"
        try:
            called = decode(ring.metadata, CallRing)
        except msgspec.MsgspecError:
            # a SIP rule with no CallRing names no org's agent: refused unknown_agent
            _log.warning("room %s: its ring carries no CallRing: it names no agent", room)
            called = CallRing(agent=fleet, caller="sip" if sip else "web")
        number = person.attributes.get(PHONE, "") if sip else ""
        return Arrival(
            call=called.call or domain.call_id_for(environment, ring.id),
            environment=environment,
            fleet=fleet,
            room=room,
            room_sid=sid,
            ring=ring.id,
            agent=called.agent,
            org=called.org,
            caller=called.caller,
            caller_identity=person.identity,
            number=number if NUMBER.fullmatch(number) else None,
            context=called.context,
            config=called.config,
        )
