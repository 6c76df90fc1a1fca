"""The phone network's side of the stand-in's SIP, over HTTP (LiveKit has no equivalent).

Same guard as `..control` (a token signed with one of the stand-in's keys). JSON in and out:

- ``POST /lab/control/sip/inbound`` ``{"from": "+15550100", "to": "+15550199", "pin": ""}``: a
  phone rings a number → ``{call_id, room, identity, token, trunk_id, rule_id}``; the caller then
  joins ``/lab/rtc`` with ``token`` (`pinecall_labroom.LabRoom.connect`). No trunk or rule takes
  the call: 404 ``{"error", "sip_status_code": 404}``, as LiveKit SIP answers the INVITE.
- ``PUT /lab/control/sip/callees/{number}`` a `legs.Callee` (``{"answer": 486}``,
  ``{"ring_s": 8}``, ``{"hangup_after_s": 5, "bye_lost": true}``, ``{"media_stops_after_s": 3}``):
  how that number answers the next calls; ``DELETE`` the same path forgets it; ``GET
  /lab/control/sip/callees`` lists them. ``PUT /lab/control/sip/callee`` a `legs.Callee`: how
  every other number answers (a lab whose callees must hang up by themselves, as `up`'s call
  backs to its callers); ``DELETE`` it to go back to picking up and never hanging up. Numbers not
  set answer as `SipService.callee_for` says (the ``+15005550XXX`` test numbers answer with SIP
  status XXX).
- ``GET /lab/control/sip/calls`` → every outbound leg: ``{call_id, room, identity, status,
  sip_status, how, heard: {sender: {first_at, bytes}}}``.
- ``POST /lab/control/sip/calls/{call_id}/hangup`` ``{"bye_lost": false}``: the callee hangs up
  now (with its BYE lost, the media timeout ends the leg); ``…/media_stop``: its RTP stops.

Unknown call: 404; a body that is not what the route needs: 400.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec
from aiohttp import web

from pinecall_loadlab.livekit.control import PREFIX, Answered, BadRequest, guard

from .legs import Callee
from .store import NoMatch, normalize

if TYPE_CHECKING:
    from pinecall_loadlab.livekit.server import StandIn


class _Ring(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    from_: str = msgspec.field(name="from")
    to: str
    pin: str = ""


class _Hangup(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    bye_lost: bool = False


T = TypeVar("T")


async def _body(request: web.Request, kind: type[T]) -> T:
    raw = await request.read()
    try:
        return msgspec.json.decode(raw or b"{}", type=kind)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise BadRequest(str(exc)) from None


def add_routes(app: web.Application, lk: StandIn) -> None:
    """Mount the SIP control routes on `app` for stand-in `lk`."""
    base = f"{PREFIX}/sip"

    async def inbound(request: web.Request) -> dict[str, Any]:
        ring = await _body(request, _Ring)
        if not ring.from_ or not ring.to:
            raise BadRequest('the body must name both numbers: {"from": "+1…", "to": "+1…"}')
        try:
            call = lk.sip.dial_in(ring.from_, ring.to, ring.pin)
        except NoMatch as exc:
            raise Answered(404, {"error": str(exc), "sip_status_code": 404}) from None
        return asdict(call)

    async def put_callee(request: web.Request) -> dict[str, Any]:
        callee = await _body(request, Callee)
        lk.sip.callees[normalize(request.match_info["number"])] = callee
        return asdict(callee)

    async def put_anyone(request: web.Request) -> dict[str, Any]:
        lk.sip.anyone = await _body(request, Callee)
        return asdict(lk.sip.anyone)

    async def delete_anyone(_: web.Request) -> dict[str, Any]:
        lk.sip.anyone = None
        return {"ok": True}

    async def delete_callee(request: web.Request) -> dict[str, Any]:
        del lk.sip.callees[normalize(request.match_info["number"])]
        return {"ok": True}

    async def callees(_: web.Request) -> dict[str, Any]:
        return {number: asdict(c) for number, c in lk.sip.callees.items()}

    async def calls(_: web.Request) -> list[dict[str, Any]]:
        return [
            {
                "call_id": leg.call_id,
                "room": leg.room.name,
                "identity": leg.participant.info.identity,
                "status": leg.status,
                "sip_status": leg.sip_status,
                "how": leg.how,
                "heard": {s: asdict(h) for s, h in leg.heard.items()},
            }
            for leg in lk.sip.legs.values()
        ]

    async def hangup(request: web.Request) -> dict[str, Any]:
        body = await _body(request, _Hangup)
        lk.sip.legs[request.match_info["call_id"]].hang_up(bye_lost=body.bye_lost)
        return {"ok": True}

    async def media_stop(request: web.Request) -> dict[str, Any]:
        lk.sip.legs[request.match_info["call_id"]].stop_media()
        return {"ok": True}

    app.router.add_post(f"{base}/inbound", guard(lk, inbound))
    app.router.add_get(f"{base}/callees", guard(lk, callees))
    app.router.add_put(f"{base}/callee", guard(lk, put_anyone))
    app.router.add_delete(f"{base}/callee", guard(lk, delete_anyone))
    app.router.add_put(f"{base}/callees/{{number}}", guard(lk, put_callee))
    app.router.add_delete(f"{base}/callees/{{number}}", guard(lk, delete_callee))
    app.router.add_get(f"{base}/calls", guard(lk, calls))
    app.router.add_post(f"{base}/calls/{{call_id}}/hangup", guard(lk, hangup))
    app.router.add_post(f"{base}/calls/{{call_id}}/media_stop", guard(lk, media_stop))
