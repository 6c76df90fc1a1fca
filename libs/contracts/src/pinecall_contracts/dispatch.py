"""What a dispatch carries: the call a caller rings for, and the job the runtime offers a worker.

Source: seed 000, "Who takes a call", "Full, at the endpoint", "A worker that dies"; seed 002,
"A deploy never cuts a call" (``entries_written``).

Two dispatches, two metadata documents (LiveKit's ``AgentDispatch.metadata`` is a string; these are
its JSON):

* :class:`CallRing`: the SIP rule's, a visitor token's or an outbound call's dispatch to the
  fleet by its **plain name** (``pinecall``), which no worker holds, so LiveKit keeps it pending on
  the room. It says which agent is called and for whom. The dispatcher reads it with ListDispatch
  when a person is alone in the room.
* :class:`JobOffer`: the dispatcher's own dispatch to one worker by its LiveKit name
  (``<fleet>/<worker>.<start>``, or ``<fleet>/overflow``), made with CreateDispatch. It carries
  what the worker needs to open the call, or to continue a dead worker's log (``written``).

``job`` says what the worker does: ``answer`` (an agent answers the caller) or ``sentence`` (the
overflow's one sentence into the room of a worker that died, then the room is deleted and the call
sealed). The overflow answers either with the sentence.

The dispatcher's own wire is here too: the token endpoint's request and answer
(:class:`TokenRequest`, :class:`VisitorToken`), an org's :class:`Quota`, and what its ops verbs
say (:class:`Journal` of a call's offers, :class:`OffersSnapshot` of the rooms in offers).
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any, Literal

import msgspec

from pinecall_contracts.base import Contract
from pinecall_contracts.calls import AgentField, CallIdField, Count
from pinecall_contracts.ids import EnvironmentField, Fleet

JobKind = Literal["answer", "sentence"]
"""``answer``: an agent answers the caller. ``sentence``: say the overflow's sentence into the
room of a worker that died, delete the room, seal the call (seed 000, "A worker that dies")."""

CallerKind = Literal["sip", "web", "outbound", "simulated"]
"""Who rang: a phone through LiveKit SIP, a web visitor with a token, an outbound call, a
simulated caller of the load lab."""

Number = Annotated[str, msgspec.Meta(pattern=r"^\+?[0-9]{3,20}$(?![\s\S])")]


class CallRing(Contract, frozen=True, kw_only=True, tag="dispatch.ring.v1"):
    """The metadata of a dispatch to a fleet's plain name: the call a caller rings for.

    A SIP dispatch rule, the token endpoint and an outbound call write it; LiveKit keeps the
    dispatch pending on the room (no worker holds the plain name) and the dispatcher places it.
    """

    agent: AgentField
    """The agent called (``support-bot``); its log gets ``fleet.full`` and call backs."""
    org: Annotated[str, msgspec.Meta(max_length=128)] = ""
    caller: CallerKind = "sip"
    call: CallIdField | None = None
    """The call's id when the endpoint that rang already chose one (the token endpoint does);
    the dispatcher makes one otherwise."""
    context: dict[str, Any] = {}
    """What the endpoint knows of the call (a page's visit, an outbound campaign)."""
    config: dict[str, Any] = {}
    """What the call runs on (voice, language, prompt's hash)."""


class JobOffer(Contract, frozen=True, kw_only=True, tag="dispatch.offer.v1"):
    """The metadata of the dispatcher's dispatch to one worker: the job it is offered.

    A worker opens ``call`` on call-log naming itself (``call.opened`` ends the room's offers); a
    ``sentence`` job and a re-offer of a dead worker's room follow on from ``written``, the count
    the log's head kept, so the log stays one ordered record.
    """

    call: CallIdField
    fleet: Fleet
    environment: EnvironmentField
    room: Annotated[str, msgspec.Meta(min_length=1, max_length=256)]
    attempt: Annotated[int, msgspec.Meta(ge=1, le=100)] = msgspec.field(name="offer")
    """Which offer of the room this is: 1 for the first; the overflow's is the one after the
    last. Named ``offer`` on the wire (the metadata's key since v1, kept so metadata of either
    release decodes in the other)."""
    job: JobKind = "answer"
    agent: AgentField
    org: Annotated[str, msgspec.Meta(max_length=128)] = ""
    caller: CallerKind = "sip"
    number: Number | None = None
    """The caller's phone number (``sip.phoneNumber``), for a call back. ``number`` is only ever
    a phone number; which offer this is is :attr:`attempt`."""
    written: Count | None = None
    """The count to follow on from: the entries the log took from the call's earlier writer."""
    arrived_at: dt.datetime
    """When the caller arrived (the first ``participant_joined``), UTC."""
    context: dict[str, Any] = {}
    config: dict[str, Any] = {}
    reoffer_at: dt.datetime | None = None
    """When the dispatcher offers the room again, to another worker or the overflow, unless the
    call is open on the log by then (UTC); None for the overflow's offer, the last. A job that
    starts close to it opens the call before it joins the room, so a caller never hears two
    agents (``pinecall_worker.domain.opens_first``)."""
    sip_trunk: str | None = None
    """An outbound call's (``caller`` ``outbound``): the LiveKit SIP outbound trunk the job
    dials ``number`` through once it holds the call (``CreateSIPParticipant``); None for every
    other call."""
    traceparent: str | None = None
    """The W3C ``traceparent`` of the dispatcher's offer: the job's spans go on in the call's
    trace from it (issue 22, "One trace per call"). None from a dispatcher that sends none."""


Identity = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,127}$(?![\s\S])")]
Org = Annotated[str, msgspec.Meta(max_length=128)]


class TokenRequest(Contract, frozen=True, kw_only=True, tag="dispatch.token_request.v1"):
    """``POST /v1/tokens`` with an app key: a web visitor's token for ``agent`` in the key's
    environment (seed 000, "Full, at the endpoint"; seed 003)."""

    agent: AgentField
    org: Org = ""
    """Whose ``concurrent_calls`` quota the call counts against."""
    identity: Identity | None = None
    """The visitor's participant identity; ``visitor-<call>`` when not given."""
    name: Annotated[str, msgspec.Meta(max_length=128)] = ""
    context: dict[str, Any] = {}
    config: dict[str, Any] = {}


class VisitorToken(Contract, frozen=True, kw_only=True, tag="dispatch.visitor_token.v1"):
    """A visitor's LiveKit token: it joins ``room`` on ``url``, and its ``roomConfig.agents`` is
    the pending dispatch to the fleet's plain name carrying a :class:`CallRing` of ``call``."""

    call: CallIdField
    room: str
    token: str
    url: str
    """The LiveKit of the environment (the fleets row's ``livekit_url``)."""
    environment: EnvironmentField
    fleet: Fleet
    expires_at: dt.datetime
    """Join by then; the admission (and the org's quota) holds the call until then."""


class Quota(Contract, frozen=True, kw_only=True, tag="dispatch.quota.v1"):
    """An org's concurrency in one environment, held at the token endpoint, never mid-call."""

    org: Annotated[str, msgspec.Meta(min_length=1, max_length=128)]
    environment: Literal["production", "sandbox"]
    """One of :data:`pinecall_contracts.ids.ENVIRONMENTS` (the schema says which)."""
    concurrent_calls: Annotated[int, msgspec.Meta(ge=0, le=1_000_000)]


class WrittenAdmission(Contract, frozen=True, kw_only=True, tag="dispatch.written_admission.v1"):
    """``POST /v1/written-calls`` with the service key: the chat service asks that a written
    call (``channel`` ``chat`` or ``whatsapp``) of ``agent`` of ``org`` in ``environment`` be
    admitted before it opens it on call-log. It counts against the org's ``concurrent_calls``
    there like a voice call, holds no worker's seat and needs no fleet heard. Asked again with
    the same ``call`` (a retry), it is admitted once."""

    call: CallIdField
    agent: AgentField
    org: Org
    environment: EnvironmentField
    channel: Literal["chat", "whatsapp"]


class WrittenAdmitted(Contract, frozen=True, kw_only=True, tag="dispatch.written_admitted.v1"):
    """A written call admitted: it counts against its org's quota until it ends (``call.ended``),
    or from ``until`` on if it never opened."""

    call: CallIdField
    environment: EnvironmentField
    until: dt.datetime


class JournalLine(Contract, frozen=True, kw_only=True, tag="dispatch.journal_line.v1"):
    """One line of the dispatcher's journal: an offer and why, or where the room went."""

    call: str
    room: str
    fleet: str
    at: dt.datetime
    line: str
    """``room <call>: offered to <fleet>/<worker>: 3 seats free, heard 2 s ago (offer 1)``."""


class JournalRequest(Contract, frozen=True, kw_only=True, tag="dispatch.journal_request.v1"):
    """The ops verb ``dispatch.journal`` over NATS."""

    call: CallIdField


class Journal(Contract, frozen=True, kw_only=True, tag="dispatch.journal.v1"):
    """``GET /v1/ops/calls/{call}/journal``: a call's offers, oldest first."""

    call: str
    lines: list[JournalLine]


class KeptRoom(Contract, frozen=True, kw_only=True, tag="dispatch.kept_room.v1"):
    """A room kept in offers past a minute (``doctor`` names it)."""

    call: str
    room: str
    fleet: str
    environment: str
    state: str
    offers: int
    worker: str | None = None
    """The last worker offered the room."""
    arrived_at: dt.datetime
    kept_s: float


class FleetOffers(Contract, frozen=True, kw_only=True, tag="dispatch.fleet_offers.v1"):
    """One fleet's rooms in offers, and its intake health."""

    fleet: str
    environment: str | None = None
    waiting: Count
    """Rooms that waited for a worker in the last ten minutes: offered again, overflowed for want
    of an open, or still unopened past a re-offer's time. Not 0 is a call LiveKit or a worker
    dropped (``pinecall_fleet{what="waiting"}``)."""
    in_offers: Count = 0
    """Rooms kept in offers now (not opened, not ended)."""
    refused: dict[str, int] = {}
    """Refusals at admission in the last ten minutes, by reason (``not_ready``, ``fleet_full``,
    ``quota``): intake health, since a refusal leaves no call record."""
    followups: Count = 0
    """Follow-ups of the fleet's environment waiting to be dialled (due now or later, or a try
    dialled and not ended): call backs the runtime owes (issue 18)."""
    followups_due: Count = 0
    """Of those, the ones due now and not dialled yet (waiting for a seat)."""
    tries: Count = 0
    """Follow-up tries that ended in the last ten minutes (answered, not reached or failed)."""
    not_reached: Count = 0
    """Of those, the ones whose callee was not reached (seed 003: a rise is a capacity or
    dispatch signal)."""


class OffersRequest(Contract, frozen=True, kw_only=True, tag="dispatch.offers_request.v1"):
    """The ops verb ``dispatch.offers`` over NATS."""

    fleet: Fleet | None = None


class OffersSnapshot(Contract, frozen=True, kw_only=True, tag="dispatch.offers.v1"):
    """``GET /v1/ops/offers``: every fleet's rooms in offers, and the rooms kept past a minute."""

    fleets: list[FleetOffers]
    kept: list[KeptRoom]
    at: dt.datetime
