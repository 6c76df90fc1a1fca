"""An outbound call: the runtime rings a phone for an agent (issue 18, "Outbound calls").

``POST /v1/calls/outbound`` (the dispatcher, with the app key) takes an :class:`OutboundRequest`
and answers an :class:`OutboundCall`; the follow-ups' dialler calls the same code
(``pinecall_dispatcher.outbound.place_outbound``). The call is admitted as a visitor's token is
(the same line, the same quota), its room made with a ring to the fleet's plain name, and offered
to a worker like every call; the worker's job dials the phone (LiveKit SIP's
``CreateSIPParticipant``) once it holds the call, so the callee never picks up to silence. A leg
that is busy, unanswered or failed ends the call ``not_reached`` with LiveKit's SIP status on its
log (:class:`Dialled`, the entry ``call.dialled``).
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any

import msgspec

from pinecall_contracts.base import Contract
from pinecall_contracts.calls import AgentField, CallIdField
from pinecall_contracts.ids import E164, EnvironmentField, Fleet

RequestId = Annotated[
    str,
    msgspec.Meta(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$(?![\s\S])", examples=["cb-7Qm2x"]),
]
"""An app-minted id of an outbound request: the same id again is the same call, dialled once."""
Org = Annotated[str, msgspec.Meta(pattern=r"^([A-Za-z0-9][A-Za-z0-9_.:-]{0,127})?$(?![\s\S])")]
"""An org's name (``ids.ORG_PATTERN``), or empty for the app key's own."""


def callee_identity(call: str) -> str:
    """The identity of ``call``'s callee in its room: the SIP participant its job dials."""
    return f"phone-{call}"


class OutboundRequest(Contract, frozen=True, kw_only=True, tag="dispatch.outbound_request.v1"):
    """``POST /v1/calls/outbound`` with an app key: ring ``to`` for ``agent`` of ``org`` in the
    key's environment."""

    agent: AgentField
    to: E164
    """The number dialled, E.164 (``+14155550123``)."""
    org: Org = ""
    """Whose agent, and whose ``concurrent_calls`` quota the call counts against (as
    ``TokenRequest.org``)."""
    context: dict[str, Any] = {}
    """What the app knows of the call (a campaign, a follow-up); the job's ``context``."""
    id: RequestId | None = None
    """The app's own id of this request: asked again with the same id (a retry), the same call
    is answered and nothing is made or dialled again. None: every request is a new call."""


class OutboundCall(Contract, frozen=True, kw_only=True, tag="dispatch.outbound_call.v1"):
    """An outbound call placed: its room is in offers and its worker dials ``to`` once it holds
    the call. How it ended is on its log (``call.ended``; ``not_reached`` when nobody answered)."""

    call: CallIdField
    id: RequestId | None = None
    """The request's id, when it named one."""
    room: str
    environment: EnvironmentField
    fleet: Fleet
    agent: AgentField
    org: Org = ""
    to: E164
    placed_at: dt.datetime
    """When the call was first placed (UTC); a retry answers the first one's."""
    replayed: bool = False
    """True when this answers a request placed before under the same ``id``: nothing was made
    or dialled again."""


class Dialled(Contract, frozen=True, kw_only=True, tag="dispatch.dialled.v1"):
    """The data of the entry ``call.dialled`` a job writes once its SIP leg is answered or not
    (LiveKit SIP's ``CreateSIPParticipant`` with ``wait_until_answered``)."""

    to: E164
    answered: bool
    sip_status_code: int | None = None
    """LiveKit SIP's status of a leg not answered (486 busy, 408 or 480 no answer, 5xx failed);
    None when answered, or when LiveKit said none."""
    sip_status: str = ""
    """Its words (``Busy Here``)."""
    trunk: str = ""
    """The outbound trunk dialled through (its ``sip_trunk_id``)."""
    participant: str = ""
    """The SIP participant's identity in the room, when answered."""
