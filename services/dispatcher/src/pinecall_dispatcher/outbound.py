"""Outbound calls: the runtime rings a phone for an agent (issue 18, "Outbound calls"; seed 000,
"Who takes a call": an outbound call is offered the same way, by the endpoint that makes it).

The seam is :func:`place_outbound` (``POST /v1/calls/outbound`` and the follow-ups' dialler both
call it). In order:

1. **The same request again.** A request naming an ``id`` that its org placed before in the
   environment answers that call (``replayed``), refused nothing and making nothing; the same
   ``id`` with another ``agent``, ``to`` or ``context`` is ``id_reused`` (409). The ``outbound``
   table's unique key decides two retries racing (:mod:`.store.outbound`).
2. **The line**, as at the token endpoint (:meth:`.admission.Admission.line`): ``unknown_agent``
   (422; another org's agent too), ``not_ready`` or ``fleet_full`` (503), each counted as line
   health; then the environment's **outbound trunk** (below): none is ``no_outbound_trunk``
   (503), counted ``no_trunk``.
3. **Admitted** under the org's quota (429 ``too_many_requests``, counted ``quota``): the
   ``outbound`` row and the call's room row, in one transaction.
4. **The room and its ring**: CreateRoom ``out-<call>`` on the environment's LiveKit with a
   dispatch to the fleet's plain name whose metadata is a ``CallRing`` of caller ``outbound``
   (as a SIP rule rings); a LiveKit that does not answer takes the call back (nothing of it
   stays) and is 503 ``livekit_unavailable``.
5. **Offered** at once through the same offers, re-offers and overflow as every ring
   (:meth:`.offering.Offering.ring`); no person is in the room yet, so the offer is made without
   waiting for one. The JobOffer carries ``number`` (the number dialled) and ``sip_trunk``; the
   worker's job dials the phone once it holds the call (``pinecall_worker.call.dial``), so the
   callee never picks up to silence.

The outbound trunk: LiveKit SIP dials through an outbound trunk (its SIP provider's address,
numbers and credentials), which only the operator can make. Each environment's LiveKit holds one
named by ``PINECALL_OUTBOUND_TRUNK`` (its name, default ``pinecall-outbound``, or its
``ST_…`` id), read with ListSIPOutboundTrunk and remembered :data:`TRUNK_CACHE_S`; ``up`` makes it
on the stand-in. The dispatcher never makes or changes one.

Errors::

    UnknownAgent (422) · NotReady, FleetFull, NoTrunk, LiveKitDown (503) · TooManyRequests (429)
    IdReused (Conflict, 409, ``id_reused``)
"""

from __future__ import annotations

import datetime as dt
import logging
import secrets
import time
from typing import Final

from opentelemetry import trace

from pinecall_clients.errors import LiveKitError
from pinecall_clients.livekit import LiveKit
from pinecall_contracts.base import encode
from pinecall_contracts.dispatch import CallRing
from pinecall_contracts.outbound import OutboundCall, OutboundRequest, callee_identity
from pinecall_dispatcher.admission import Admission
from pinecall_dispatcher.livekit import LiveKits
from pinecall_dispatcher.metrics import Metrics
from pinecall_dispatcher.offering import Offering
from pinecall_dispatcher.settings import DispatcherSettings
from pinecall_dispatcher.store import Arrival, Store
from pinecall_dispatcher.store.outbound import Admitted
from pinecall_servicekit import calltrace
from pinecall_servicekit.db import utcnow
from pinecall_servicekit.errors import Conflict, TooManyRequests, Unavailable

_log = logging.getLogger(__name__)
_tracer = trace.get_tracer(__name__)
OUTBOUND: Final = "outbound"
"""The caller kind of an outbound call (``CallRing.caller``, ``JobOffer.caller``)."""
TRUNK_CACHE_S = 30.0
"""How long an environment's outbound trunk, once read, is remembered (seconds)."""


class NoTrunk(Unavailable):
    code = "no_outbound_trunk"


class IdReused(Conflict):
    code = "id_reused"


class LiveKitDown(Unavailable):
    code = "livekit_unavailable"


class Outbound:
    """Places outbound calls (the module docstring); one per dispatcher replica."""

    def __init__(
        self,
        settings: DispatcherSettings,
        store: Store,
        admission: Admission,
        livekits: LiveKits,
        offering: Offering,
        metrics: Metrics,
    ) -> None:
        self.settings, self.store, self.admission = settings, store, admission
        self.livekits, self.offering, self.metrics = livekits, offering, metrics
        self._trunks: dict[str, tuple[float, str]] = {}
        """Per environment: until when (monotonic) its trunk's id stands, and the id."""

    async def place(self, request: OutboundRequest, environment: str) -> OutboundCall:
        """Place ``request`` in ``environment`` (steps 1 to 5 of the module docstring)."""
        if request.id is not None:
            found = await self.store.outbound.find(environment, request.org, request.id)
            if found is not None:
                return await self._again(found, request)
        record = await self.admission.line(request, environment, asker="outbound")
        livekit = self.livekits.of(environment, record.livekit_url)
        trunk = await self._trunk(environment, livekit, request, record.name)
        now = utcnow()
        call = f"call_{secrets.token_hex(10)}"
        try:
            admitted = await self.store.outbound.admit(
                {
                    "call": call,
                    "environment": environment,
                    "org": request.org,
                    "request": request.id,
                    "agent": request.agent,
                    "number": request.to,
                    "context": request.context,
                    "fleet": record.name,
                    "room": f"out-{call}",
                    "sip_trunk": trunk,
                },
                {
                    "call": call,
                    "environment": environment,
                    "fleet": record.name,
                    "room": f"out-{call}",
                    "agent": request.agent,
                    "org": request.org,
                    "caller": OUTBOUND,
                    "caller_identity": callee_identity(call),
                    "number": request.to,
                    "state": "admitted",
                    "context": request.context,
                    "sip_trunk": trunk,
                    "admitted_until": now + _seconds(self.settings.admit_s),
                },
                now,
                self.settings.max_call_seconds,
                self.settings.written_held_s,
            )
        except TooManyRequests:
            await self.admission.refused(request, environment, record.name, "quota")
            raise
        if not admitted.new:  # a request of the same id won a race with this one
            return await self._again(admitted, request)
        self.metrics.admissions.labels(environment, record.name, "admitted").inc()
        try:
            await self._ring(admitted, livekit)
        except LiveKitError as exc:
            await self.store.outbound.forget(call)
            raise LiveKitDown(f"the LiveKit of {environment} did not make the room: {exc}") from exc
        return _answer(admitted, replayed=False)

    async def _again(self, found: Admitted, request: OutboundRequest) -> OutboundCall:
        """The call an earlier request of the same id placed; rung again only if its replica
        stopped before its room was made (its row still ``admitted``)."""
        row = found.outbound
        if (row.agent, row.number, row.context) != (request.agent, request.to, request.context):
            raise IdReused(
                f"id {request.id} was placed as call {row.call} (agent {row.agent}, to "
                f"{row.number}) with another request: send a new id for a new call"
            )
        if found.room is not None and found.room.state == "admitted":
            record = await self.admission.roster.fleet(row.fleet)
            if record is not None:
                livekit = self.livekits.of(row.environment, record.livekit_url)
                try:
                    await self._ring(found, livekit)
                except LiveKitError as exc:
                    raise LiveKitDown(f"call {row.call}: its room was not made: {exc}") from exc
        return _answer(found, replayed=True)

    async def _ring(self, admitted: Admitted, livekit: LiveKit) -> None:
        """Make the call's room with its ring, and offer it."""
        row = admitted.outbound
        ring = CallRing(
            agent=row.agent, org=row.org, caller=OUTBOUND, call=row.call, context=row.context
        )
        # the outbound call's trace starts here, as a phone's starts at its first webhook
        with _tracer.start_as_current_span(
            "place outbound",
            context=calltrace.call_context(row.environment, row.room),
            attributes={calltrace.CALL: row.call, calltrace.ROOM: row.room},
        ):
            sid = await livekit.create_room(
                row.room, agent_name=row.fleet, metadata=encode(ring).decode()
            )
        arrival = Arrival(
            call=row.call,
            environment=row.environment,
            fleet=row.fleet,
            room=row.room,
            room_sid=sid,
            ring=None,
            agent=row.agent,
            org=row.org,
            caller=OUTBOUND,
            caller_identity=callee_identity(row.call),
            number=row.number,
            context=row.context,
        )
        await self.offering.ring(arrival, livekit)

    async def _trunk(
        self, environment: str, livekit: LiveKit, request: OutboundRequest, fleet: str
    ) -> str:
        """The id of ``environment``'s outbound trunk (the module docstring), or ``NoTrunk``
        (counted ``no_trunk``)."""
        known = self._trunks.get(environment)
        if known is not None and known[0] > time.monotonic():
            return known[1]
        wanted = self.settings.outbound_trunk
        try:
            trunks = await livekit.outbound_trunks()
        except LiveKitError as exc:
            raise LiveKitDown(
                f"the LiveKit of {environment} did not list its trunks: {exc}"
            ) from exc
        trunk = next((t.id for t in trunks if wanted in (t.id, t.name)), None)
        if trunk is None:
            await self.admission.refused(request, environment, fleet, "no_trunk")
            raise NoTrunk(
                f"the LiveKit of {environment} has no SIP outbound trunk {wanted}: make it with "
                "your SIP provider's address and numbers (lk sip outbound create), or name "
                "yours in PINECALL_OUTBOUND_TRUNK"
            )
        self._trunks[environment] = (time.monotonic() + TRUNK_CACHE_S, trunk)
        return trunk


async def place_outbound(
    outbound: Outbound, request: OutboundRequest, *, environment: str
) -> OutboundCall:
    """Place an outbound call of ``request.agent`` of ``request.org`` to ``request.to`` in
    ``environment``: admitted like a visitor's token, its room made and offered to a worker, who
    dials the phone once it holds the call. The call's id is in the answer; how it ended comes
    on its log (``call.ended``: ``not_reached`` with the SIP status when nobody answered).

    Idempotent on ``request.id``: the same id again answers the same call (``replayed``) and
    dials nothing again, whatever the line says now. The seam of ``POST /v1/calls/outbound``
    and of the follow-ups' dialler (give each try its own ``id`` so a try is dialled once).

    Raises (each a problem detail at the HTTP edge, nothing made): ``UnknownAgent`` (422),
    ``NotReady`` / ``FleetFull`` (503: the line is not ready; retry later), ``NoTrunk`` (503),
    ``TooManyRequests`` (429: the org's quota), ``IdReused`` (409), ``LiveKitDown`` (503).
    """
    return await outbound.place(request, environment)


def _answer(admitted: Admitted, *, replayed: bool) -> OutboundCall:
    row = admitted.outbound
    return OutboundCall(
        call=row.call,
        id=row.request,
        room=row.room,
        environment=row.environment,
        fleet=row.fleet,
        agent=row.agent,
        org=row.org,
        to=row.number,
        placed_at=row.placed_at,
        replayed=replayed,
    )


def _seconds(s: float) -> dt.timedelta:
    return dt.timedelta(seconds=s)
