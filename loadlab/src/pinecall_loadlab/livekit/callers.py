"""Simulated callers: a phone call as LiveKit SIP brings it, and a web visitor.

A phone caller rings a number through the stand-in's SIP service (`sip.service`,
``/lab/control/sip/inbound``): the number's inbound trunk and dispatch rule make the room, its
dispatch to the fleet's *plain* name (which no worker holds, so that dispatch stays pending, as
the runtime's design expects) and the SIP participant with LiveKit SIP's ``sip.*`` attributes,
as whom the caller joins; it speaks and hears over the lab-room transport. :func:`lab_number`
sets a number up as the lab's (a trunk and an Individual rule); :func:`dial` rings any number;
:func:`sip_call` rings the lab's number into a room named in advance (a Direct rule behind a
PIN the caller enters, removed once the caller is in).

A web visitor asks the dispatcher's token endpoint (``POST /v1/tokens``, an app key) for a token
whose ``roomConfig.agents`` is the pending ring, then joins the room it names with it, which
creates the room with that dispatch (:func:`web_call`). Errors: :class:`Refused` when the
endpoint says no (``fleet_full``, ``not_ready``, the org's quota).
"""

from __future__ import annotations

import secrets

import aiohttp
import httpx
import msgspec
from livekit import api
from livekit.protocol import sip

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


class Unrouted(Exception):
    """No trunk or dispatch rule took the call: LiveKit SIP answered 404 (``detail`` says
    why)."""


async def lab_trunk(lkapi: api.LiveKitAPI, number: str) -> str:
    """The id of the inbound trunk holding `number`, made if none does (a concurrent maker's
    trunk is found again)."""
    for attempt in range(2):
        found = await lkapi.sip.list_inbound_trunk(sip.ListSIPInboundTrunkRequest(numbers=[number]))
        if found.items:
            return str(found.items[0].sip_trunk_id)
        trunk = sip.SIPInboundTrunkInfo(name=f"lab {number}", numbers=[number])
        try:
            made = await lkapi.sip.create_inbound_trunk(
                sip.CreateSIPInboundTrunkRequest(trunk=trunk)
            )
        except api.TwirpError:
            if attempt:
                raise
            continue  # another caller made it meanwhile
        return str(made.sip_trunk_id)
    raise AssertionError("unreachable")


def _dispatch_to(fleet: str, metadata: str) -> api.RoomConfiguration:
    return api.RoomConfiguration(
        agents=[api.RoomAgentDispatch(agent_name=fleet, metadata=metadata)]
    )


async def lab_number(
    lkapi: api.LiveKitAPI,
    number: str,
    *,
    fleet: str,
    metadata: str = LAB_RING,
    room_prefix: str = "call",
) -> tuple[str, str]:
    """Make `number` the lab's: its inbound trunk (:func:`lab_trunk`) and an Individual dispatch
    rule (rooms ``<room_prefix>_<caller>_<random>``) dispatching to `fleet` with `metadata`, as
    an operator would set LiveKit SIP up. Returns ``(trunk_id, rule_id)``; `api.TwirpError`
    ``invalid_argument`` if the trunk already has an open rule."""
    trunk_id = await lab_trunk(lkapi, number)
    rule = sip.SIPDispatchRuleInfo(
        name=f"lab {number}",
        trunk_ids=[trunk_id],
        rule=sip.SIPDispatchRule(
            dispatch_rule_individual=sip.SIPDispatchRuleIndividual(room_prefix=room_prefix)
        ),
        room_config=_dispatch_to(fleet, metadata),
    )
    made = await lkapi.sip.create_dispatch_rule(
        sip.CreateSIPDispatchRuleRequest(dispatch_rule=rule)
    )
    return trunk_id, str(made.sip_dispatch_rule_id)


async def dial(
    url: str, api_key: str, api_secret: str, *, phone: str, to: str, pin: str = ""
) -> LabRoom:
    """A phone at `phone` rings `to` (entering `pin`, if any) through the stand-in's SIP at
    `url`, and is in the room the number's rule made, as LiveKit SIP's participant
    (``sip_<phone>``). :class:`Unrouted` when no trunk or rule takes the call;
    ``aiohttp.ClientError`` when the stand-in does not answer."""
    control = api.AccessToken(api_key, api_secret).to_jwt()
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            f"{url}/lab/control/sip/inbound",
            json={"from": phone, "to": to, "pin": pin},
            headers={"Authorization": f"Bearer {control}"},
        ) as r,
    ):
        body = await r.json()
        if r.status == 404:
            raise Unrouted(body.get("error", ""))
        r.raise_for_status()
    return await LabRoom.connect(url, body["token"])


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
    """A phone at `phone` rings the lab's number `trunk_phone` and lands in `room`, dispatched
    to `fleet` with `metadata` (the runtime's ``CallRing`` JSON: the lab's agent's ring by
    default, ``""`` for a rule that names none).

    The room is named in advance as LiveKit SIP allows it: a Direct dispatch rule into `room`
    behind a fresh PIN on the number's trunk (made if absent), which the caller enters; the rule
    is deleted once the caller is in. Errors as :func:`dial`, and `api.TwirpError`."""
    trunk_id = await lab_trunk(lkapi, trunk_phone)
    pin = f"{secrets.randbelow(10**9):09d}"
    rule = await lkapi.sip.create_dispatch_rule(
        sip.CreateSIPDispatchRuleRequest(
            dispatch_rule=sip.SIPDispatchRuleInfo(
                name=f"lab call into {room}",
                trunk_ids=[trunk_id],
                rule=sip.SIPDispatchRule(
                    dispatch_rule_direct=sip.SIPDispatchRuleDirect(room_name=room, pin=pin)
                ),
                room_config=_dispatch_to(fleet, metadata),
            )
        )
    )
    try:
        return await dial(url, api_key, api_secret, phone=phone, to=trunk_phone, pin=pin)
    finally:
        await lkapi.sip.delete_dispatch_rule(
            sip.DeleteSIPDispatchRuleRequest(sip_dispatch_rule_id=rule.sip_dispatch_rule_id)
        )


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
