"""Simulated callers: a phone call as LiveKit SIP brings it, and a web visitor.

A SIP call is a room of its own, created with one dispatch to the fleet's *plain* name (which no
worker holds, so that dispatch stays pending, as the runtime's design expects), and the caller
joining it as a SIP participant with LiveKit SIP's attributes (``sip.phoneNumber``,
``sip.trunkPhoneNumber``). The caller speaks and hears over the lab-room transport.

A web visitor asks the dispatcher's token endpoint (``POST /v1/tokens``, an app key) for a token
whose ``roomConfig.agents`` is the pending ring, then joins the room it names with it, which
creates the room with that dispatch (:func:`web_call`). Errors: :class:`Refused` when the
endpoint says no (``fleet_full``, ``not_ready``, the org's quota).
"""

from __future__ import annotations

import httpx
import msgspec
from livekit import api

from pinecall_contracts.base import decode, encode
from pinecall_contracts.dispatch import CallRing, TokenRequest, VisitorToken
from pinecall_contracts.problems import ProblemDetails
from pinecall_labroom import LabRoom

LAB_ORG = "lab"
LAB_AGENT = "lab-agent"
"""The lab's agent and its org: what a lab caller rings for unless told otherwise. A platform
the lab rings defines it (the chain does: ``pinecall_loadlab.scenarios.chain``), or the
dispatcher refuses its callers ``unknown_agent``."""
LAB_RING = encode(CallRing(agent=LAB_AGENT, org=LAB_ORG, caller="sip")).decode()
"""What the lab's SIP dispatch rule puts on its ring (a ``CallRing`` for the lab's agent)."""


class Refused(Exception):
    """The token endpoint refused the visitor: HTTP ``status`` and the problem's ``code``
    (``fleet_full``, ``not_ready``, ``too_many_requests``…) and ``detail``."""

    def __init__(self, status: int, code: str, detail: str) -> None:
        super().__init__(f"{status} {code}: {detail}")
        self.status, self.code, self.detail = status, code, detail


def caller_token(
    api_key: str,
    api_secret: str,
    *,
    room: str,
    identity: str,
    kind: str = "standard",
    attributes: dict[str, str] | None = None,
) -> str:
    """A participant's join token (roomJoin for `room`), as LiveKit SIP or an app would mint it."""
    tok = (
        api.AccessToken(api_key, api_secret)
        .with_identity(identity)
        .with_kind(kind)  # type: ignore[arg-type]
        .with_grants(api.VideoGrants(room_join=True, room=room))
    )
    if attributes:
        tok = tok.with_attributes(attributes)
    return tok.to_jwt()


def agent_token(api_key: str, api_secret: str, *, room: str, identity: str) -> str:
    """An agent participant's join token for `room` (kind agent, the `agent` grant), as LiveKit
    mints one for a job (``shared/reference/livekit-protocol.md`` §1.5)."""
    return (
        api.AccessToken(api_key, api_secret)
        .with_identity(identity)
        .with_kind("agent")
        .with_grants(api.VideoGrants(room_join=True, room=room, agent=True))
        .to_jwt()
    )


async def sip_call(
    lkapi: api.LiveKitAPI,
    url: str,
    api_key: str,
    api_secret: str,
    *,
    room: str,
    fleet: str,
    phone: str = "+15550100",
    trunk_phone: str = "+15550199",
    metadata: str = LAB_RING,
) -> LabRoom:
    """Create `room` with a dispatch to `fleet` and join it as the SIP caller ``sip_<phone>``.

    `metadata` is the dispatch's, as a SIP dispatch rule's room config gives it (the runtime's
    ``CallRing`` JSON): the lab's agent's ring by default, ``""`` for a rule that names none."""
    await lkapi.room.create_room(
        api.CreateRoomRequest(
            name=room, agents=[api.RoomAgentDispatch(agent_name=fleet, metadata=metadata)]
        )
    )
    token = caller_token(
        api_key,
        api_secret,
        room=room,
        identity=f"sip_{phone}",
        kind="sip",
        attributes={"sip.phoneNumber": phone, "sip.trunkPhoneNumber": trunk_phone},
    )
    return await LabRoom.connect(url, token)


async def web_call(
    http: httpx.AsyncClient, dispatcher_url: str, app_key: str, request: TokenRequest
) -> tuple[VisitorToken, LabRoom]:
    """A web visitor: ``request``'s token from the dispatcher at ``dispatcher_url`` with
    ``app_key``, then the visitor in the room it names (seed 000, "Full, at the endpoint").

    Raises :class:`Refused` for a 4xx or 5xx answer, ``httpx.HTTPError`` when nothing answers.
    """
    r = await http.post(
        f"{dispatcher_url}/v1/tokens",
        content=encode(request),
        headers={"authorization": f"Bearer {app_key}", "content-type": "application/json"},
    )
    if r.status_code != httpx.codes.OK:
        try:
            problem = msgspec.json.decode(r.content, type=ProblemDetails)
            code, detail = problem.code or problem.title, problem.detail or ""
        except msgspec.MsgspecError:
            code, detail = "unknown", r.text[:200]
        raise Refused(r.status_code, code, detail)
    token = decode(r.content, VisitorToken)
    return token, await LabRoom.connect(token.url, token.token)
