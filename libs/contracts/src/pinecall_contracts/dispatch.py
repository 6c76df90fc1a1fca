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

Number = Annotated[str, msgspec.Meta(pattern=r"^\+?[0-9]{3,20}$")]


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
    offer: Annotated[int, msgspec.Meta(ge=1, le=100)]
    """1 for the first offer of the room; the overflow's is the offer after the last."""
    job: JobKind = "answer"
    agent: AgentField
    org: Annotated[str, msgspec.Meta(max_length=128)] = ""
    caller: CallerKind = "sip"
    number: Number | None = None
    """The caller's phone number (``sip.phoneNumber``), for a call back."""
    written: Count | None = None
    """The count to follow on from: the entries the log took from the call's earlier writer."""
    arrived_at: dt.datetime
    """When the caller arrived (the first ``participant_joined``), UTC."""
    context: dict[str, Any] = {}
    config: dict[str, Any] = {}
