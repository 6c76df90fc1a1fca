"""Admission at the token endpoint (seed 000, "Full, at the endpoint"; seed 003).

A web visitor's token is minted for an agent in the app key's environment, on the LiveKit of that
environment's fleet; its ``roomConfig.agents`` is the pending dispatch to the fleet's plain name
carrying a :class:`CallRing` with the call's id, so the visitor's join makes the room and the
dispatcher places it like any ring. Before it is minted, in order:

0. ``unknown_agent`` (422): the request's org has no such agent in the key's environment
   (:class:`~pinecall_dispatcher.agents.Agents`: call-log's answer, remembered 5 s; when call-log
   does not answer, the last answer stands, and none admits). A 422, as the house answers a
   well-formed body naming what cannot be acted on (``no environment 'mars'``, a definition
   breaking a rule): not a 503, since it is no line health and asking again will not pass; not a
   404, since ``/v1/tokens`` itself is there. A request naming no org names no agent. It is
   checked before line health, so a page asking for a mistyped agent hears so and not
   ``fleet_full`` (and no ``fleet.full`` is written on the log of an agent that does not exist).
   Only a fleet that serves the environment is asked about at all (no fleet is ``not_ready``).
1. ``not_ready`` (503): no worker of the fleet heard for 90 s; nothing is written.
2. ``fleet_full`` (503): no worker of the fleet can be offered the call now (the dispatcher's own
   rule: no worker heard lately with a seat free, counting rooms offered and not counted), and
   the problem names ``POST /v1/callbacks``, so the page offers a call back before any room is
   made. What is written on the agent's log through call-log, and the refusal's reason, say what
   is true (``domain.admission``): ``fleet.full`` when the workers heard lately are full
   (reason ``fleet_full``); ``fleet.refused`` with ``reason`` ``unheard`` (no worker heard in the
   last 12 s) or ``cordoned`` (every worker heard lately is cordoned or draining) otherwise. The
   problem's detail says the same.
3. ``quota`` (429): the org holds its ``concurrent_calls`` in this environment (the quotas table,
   ``pinecall-runtime dispatcher quota set``); held here, never mid-call, and a sandbox call never
   counts against production.

**A written call** (a chat, a WhatsApp thread; issue 17) is admitted by
:meth:`Admission.written` (``POST /v1/written-calls``, the chat service's service key) before the
chat service opens it: ``unknown_agent`` (422) as above, then the quota (429), and nothing else.
It needs no fleet heard and holds no worker's seat (it runs in the chat service's process): the
quota is the org's calls at once, not seats. Its refusals are counted under
``written/<channel>`` where a voice refusal names its fleet.

Each refusal is counted (``pinecall_admissions_total``, and the refusals table that ``doctor``
reads) because it leaves no call record. ``unknown_agent`` too, though it is the tenant's
mistake and not line health, as the quota is: a caller refused for it is a caller no agent
answered, and for a phone ring (:mod:`.placing`) the count is the only trace there is; ``doctor``
says what to do about it apart from the fleet's health.

Errors::

    UnknownAgent (Unprocessable, 422, ``unknown_agent``)
    NotReady (Unavailable, 503, ``not_ready``) · FleetFull (Unavailable, 503, ``fleet_full``)
    TooManyRequests (429, ``too_many_requests``: the quota)
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import secrets

from livekit import api
from livekit.protocol.room import RoomConfiguration
from opentelemetry import trace

from pinecall_clients.calllog import CallLogClient
from pinecall_clients.errors import CallLogError
from pinecall_contracts.base import encode
from pinecall_contracts.calls import AgentEntry
from pinecall_contracts.dispatch import (
    CallerKind,
    CallRing,
    TokenRequest,
    VisitorToken,
    WrittenAdmission,
    WrittenAdmitted,
)
from pinecall_contracts.fleet import FleetRecord
from pinecall_contracts.keys import KeyInfo
from pinecall_contracts.outbound import OutboundRequest
from pinecall_dispatcher import domain
from pinecall_dispatcher.agents import Agents
from pinecall_dispatcher.metrics import Metrics
from pinecall_dispatcher.roster import RosterView
from pinecall_dispatcher.settings import DispatcherSettings
from pinecall_dispatcher.store import Store
from pinecall_servicekit import calltrace
from pinecall_servicekit.db import utcnow
from pinecall_servicekit.errors import TooManyRequests, Unavailable, Unprocessable

_log = logging.getLogger(__name__)
_tracer = trace.get_tracer(__name__)
ON_THE_LOG_WITHIN_S = 2.0
"""How long a refusal's entry on the agent's log may hold the refused visitor's answer."""
CALLBACKS = "POST /v1/callbacks"
WHEN_FULL: dict[str, str] = {
    "web": f"offer the caller a call back ({CALLBACKS})",
    "simulated": "run the eval again once a seat is free",
    "outbound": "place the call again once a seat is free",
}
"""What a full fleet's 503 tells its asker to do, by who was refused: a visitor can be called
back; an eval or an outbound call has no caller waiting to call back."""
FLEET_FULL, FLEET_REFUSED = "fleet.full", "fleet.refused"
"""The agent log's kinds for a caller refused at the token endpoint: ``fleet.full`` for a full
fleet, ``fleet.refused`` (with its ``reason``) for a fleet refused for another reason."""
NO_SEAT = {
    "fleet_full": "no worker of {fleet} has a seat free",
    "unheard": "no worker of {fleet} was heard in the last {heard_s:.0f} s",
    "cordoned": "every worker of {fleet} heard lately is cordoned or draining",
}
"""The problem's words for each refusal that answers ``fleet_full``."""
ROOM_PREFIX: dict[CallerKind, str] = {
    "web": "web",
    "simulated": "eval",
    "sip": "sip",
    "outbound": "out",
}
"""A room's name is ``<prefix>-<call>``: who rang it, at a glance in ``logs`` and LiveKit."""


Asked = TokenRequest | WrittenAdmission | OutboundRequest
"""What asks to be admitted: a visitor's token, a written call, an outbound call."""


class UnknownAgent(Unprocessable):
    code = "unknown_agent"


def unknown_agent(agent: str, org: str, environment: str) -> UnknownAgent:
    """The refusal of a ring or token for an agent ``org`` does not define in ``environment``."""
    whose = f"of org {org}" if org else "of no org (name the agent's org)"
    return UnknownAgent(
        f"no agent {agent} {whose} in {environment}: define it there "
        f"(PUT /v1/agents/{agent}?org={org or '<org>'} on call-log), or ask for one that is",
        errors=[{"message": "no such agent", "key": "agent", "source": "body"}],
    )


class NotReady(Unavailable):
    code = "not_ready"


class FleetFull(Unavailable):
    code = "fleet_full"


class Admission:
    """Admits a visitor's call, or refuses it and says so."""

    def __init__(
        self,
        settings: DispatcherSettings,
        store: Store,
        roster: RosterView,
        call_log: CallLogClient,
        metrics: Metrics,
        agents: Agents,
    ) -> None:
        self.settings = settings
        self.keys = settings.keys()
        self.store, self.roster, self.call_log, self.metrics = store, roster, call_log, metrics
        self.agents = agents

    async def token(self, request: TokenRequest, key: KeyInfo) -> VisitorToken:
        """The visitor's token, or the first refusal that holds (the module docstring)."""
        return await self.admit(request, key.environment or "")

    async def admit(
        self, request: TokenRequest, environment: str, *, caller: CallerKind = "web"
    ) -> VisitorToken:
        """A token of ``caller`` (a web visitor; the runtime's own simulated caller, whose
        endpoint admits it the same way: seed 000, "Who takes a call") in ``environment``, or
        the first refusal that holds (the module docstring)."""
        record = await self.line(request, environment, asker=caller)
        fleet = record.name
        now = utcnow()
        call = f"call_{secrets.token_hex(10)}"
        room = f"{ROOM_PREFIX[caller]}-{call}"
        until = now + dt.timedelta(seconds=self.settings.admit_s)
        ring = CallRing(
            agent=request.agent,
            org=request.org,
            caller=caller,
            call=call,
            context=request.context,
            config=request.config,
        )
        try:
            await self.store.admissions.admit(
                {
                    "call": call,
                    "environment": environment,
                    "fleet": fleet,
                    "room": room,
                    "agent": request.agent,
                    "org": request.org,
                    "caller": caller,
                    "state": "admitted",
                    "context": request.context,
                    "config": request.config,
                    "admitted_until": until,
                },
                now,
                self.settings.max_call_seconds,
                self.settings.written_held_s,
            )
        except TooManyRequests:
            await self.refused(request, environment, fleet, "quota")
            raise
        self.metrics.admissions.labels(environment, fleet, "admitted").inc()
        # the visitor's call starts its trace here, as a phone's starts at its first webhook
        with _tracer.start_as_current_span(
            f"admit {caller}",
            context=calltrace.call_context(environment, room),
            attributes={calltrace.CALL: call, calltrace.ROOM: room},
        ):
            token = self._mint(environment, fleet, room, request, ring, call)
        return VisitorToken(
            call=call,
            room=room,
            token=token,
            url=record.livekit_url,
            environment=environment,
            fleet=fleet,
            expires_at=until,
        )

    async def line(self, request: Asked, environment: str, *, asker: str = "web") -> FleetRecord:
        """The fleet of ``environment`` if ``request``'s call may be admitted to it now, or the
        first refusal of steps 0 to 2 (the module docstring), counted and said: the token
        endpoint's and an outbound call's (:mod:`.outbound`) one line. ``asker`` (a key of
        :data:`WHEN_FULL`) says what a full fleet's refusal advises."""
        record = await self.roster.fleet_of(environment)
        if record is None or environment not in self.keys:
            raise NotReady(f"no fleet and LiveKit serve {environment}")
        fleet = record.name
        if await self.agents.lookup(environment, request.org, request.agent) == "unknown":
            await self.refused(request, environment, fleet, "unknown_agent")
            raise unknown_agent(request.agent, request.org, environment)
        now = utcnow()
        rows = await self.roster.rows(fleet)
        offered, held = await self.store.offers.promised(fleet, now, self.settings.max_call_seconds)
        rules = self.settings.rules()
        verdict = domain.admission(rows, domain.not_counted(rows, offered, held), rules)
        if verdict == "not_ready":
            await self.refused(request, environment, fleet, "not_ready")
            raise NotReady(f"no worker of {fleet} was heard in {self.settings.not_ready_s:.0f} s")
        if verdict != "admit":
            await self._on_the_agents_log(request, environment, fleet, verdict)
            await self.refused(request, environment, fleet, verdict)
            raise FleetFull(
                NO_SEAT[verdict].format(fleet=fleet, heard_s=rules.heard_s)
                + f": {WHEN_FULL.get(asker, WHEN_FULL['web'])}"
            )
        return record

    async def written(self, request: WrittenAdmission) -> WrittenAdmitted:
        """Admit a written call, or refuse it (``UnknownAgent``, ``TooManyRequests``), counted
        under ``written/<channel>``; a call admitted before is admitted again, not counted."""
        environment, counted_as = request.environment, f"written/{request.channel}"
        if await self.agents.lookup(environment, request.org, request.agent) == "unknown":
            await self.refused(request, environment, counted_as, "unknown_agent")
            raise unknown_agent(request.agent, request.org, environment)
        now = utcnow()
        until = now + dt.timedelta(seconds=self.settings.admit_s)
        try:
            new = await self.store.admissions.admit_written(
                {
                    "call": request.call,
                    "environment": environment,
                    "org": request.org,
                    "agent": request.agent,
                    "channel": request.channel,
                    "admitted_until": until,
                },
                now,
                self.settings.max_call_seconds,
                self.settings.written_held_s,
            )
        except TooManyRequests:
            await self.refused(request, environment, counted_as, "quota")
            raise
        if new:
            self.metrics.admissions.labels(environment, counted_as, "admitted").inc()
        return WrittenAdmitted(call=request.call, environment=environment, until=until)

    def _mint(
        self,
        environment: str,
        fleet: str,
        room: str,
        request: TokenRequest,
        ring: CallRing,
        call: str,
    ) -> str:
        key, secret = self.keys[environment]
        dispatch = api.RoomAgentDispatch(agent_name=fleet, metadata=encode(ring).decode())
        return (
            api.AccessToken(key, secret)
            .with_identity(request.identity or f"visitor-{call}")
            .with_name(request.name)
            .with_kind("standard")
            .with_grants(
                api.VideoGrants(
                    room_join=True,
                    room=room,
                    can_publish=True,
                    can_subscribe=True,
                    can_publish_data=True,
                )
            )
            .with_room_config(RoomConfiguration(agents=[dispatch]))
            .with_ttl(dt.timedelta(seconds=self.settings.admit_s))
            .to_jwt()
        )

    async def refused(
        self,
        request: Asked,
        environment: str,
        fleet: str,
        reason: str,
    ) -> None:
        """Count a refusal of ``request`` for ``reason`` (line health: it leaves no call
        record): the metric, the refusals table ``doctor`` reads, a log line."""
        self.metrics.admissions.labels(environment, fleet, reason).inc()
        await self.store.admissions.refused(
            utcnow(), environment, fleet, request.agent, request.org, reason
        )
        _log.warning("admission of %s in %s refused: %s", request.agent, environment, reason)

    async def _on_the_agents_log(
        self, request: Asked, environment: str, fleet: str, reason: str
    ) -> None:
        """``fleet.full`` (full) or ``fleet.refused`` with ``reason`` on the agent's log,
        through call-log (its owner), with the service key naming the environment."""
        data = {"fleet": fleet, "org": request.org, "callbacks": CALLBACKS}
        entry = (
            AgentEntry(kind=FLEET_FULL, data=data)
            if reason == "fleet_full"
            else AgentEntry(kind=FLEET_REFUSED, data=data | {"reason": reason})
        )
        try:
            # the visitor waits for its refusal meanwhile: retried within this, then given up
            async with asyncio.timeout(ON_THE_LOG_WITHIN_S):
                await self.call_log.agent_entry(
                    request.agent, entry, environment=environment, within_s=ON_THE_LOG_WITHIN_S
                )
        except TimeoutError:
            _log.warning(
                "%s of %s not written: call-log did not answer in %.0f s",
                entry.kind,
                fleet,
                ON_THE_LOG_WITHIN_S,
            )
        except CallLogError as exc:
            _log.warning("%s of %s not written: %s", entry.kind, fleet, exc)
