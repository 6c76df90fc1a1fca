"""LiveKit's SIP service on its Twirp wire (``livekit.SIP``), and the phone network's side of it.

The methods livekit-api's `SipService` calls (`livekit_sip.proto`), with LiveKit's grants
(`LK:pkg/service/sip.go`: SIP ``admin`` for trunks and rules, SIP ``call`` for dialling):

- ``CreateSIPInboundTrunk`` / ``CreateSIPOutboundTrunk`` / ``ListSIPInboundTrunk`` /
  ``ListSIPOutboundTrunk`` / ``DeleteSIPTrunk``;
- ``CreateSIPDispatchRule`` / ``ListSIPDispatchRule`` / ``DeleteSIPDispatchRule`` — every rule kind
  is stored and routed: Individual (``prefix_<caller>_<random>``), Direct (one room, optional PIN)
  and Callee (``prefix_<called>``);
- ``CreateSIPParticipant`` through a stored outbound trunk (`legs` models the call). Refused with
  ``invalid_argument``, as not modelled: an inline ``trunk``, ``play_dialtone`` /
  ``play_ringtone`` (no dial tone is played), ``dtmf``. Honoured: ``wait_until_answered``,
  ``ringing_timeout``, ``max_call_duration``, ``participant_identity`` / ``_name`` /
  ``_metadata`` / ``_attributes``, ``hide_phone_number``, ``sip_number``. Headers, media and
  encryption options are accepted and have no effect (there is no SIP or RTP on the lab's wire).

An inbound call (`SipService.dial_in`) is what LiveKit SIP does on an INVITE
(`pkg/sip/inbound.go`, `EvaluateDispatchRule`): the called number's trunk and the best rule make
the room name, the participant's identity (``sip_<caller>``), name (``Phone <caller>``),
metadata (the rule's) and attributes (the rule's + ``sip.callID``, ``sip.trunkID``,
``sip.ruleID``, ``sip.phoneNumber``, ``sip.trunkPhoneNumber``, ``sip.callStatus`` ``active``);
LiveKit SIP joins with a token carrying the rule's ``room_config``, so the room is created with
the rule's agent dispatches. On the stand-in the caller itself joins with that token over the
lab-room transport, speaking and hearing as the phone would.
"""

from __future__ import annotations

import asyncio
import datetime
import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from aiohttp import web
from google.protobuf.message import Message
from livekit import api
from livekit.api.access_token import Claims
from livekit.protocol import models
from livekit.protocol import sip as lsip

from pinecall_loadlab.livekit import events as ev
from pinecall_loadlab.livekit import ids
from pinecall_loadlab.livekit.twirp import Routes, TwirpError

from . import store as st
from .legs import STATUS_ATTR, Callee, Leg, magic_callee

if TYPE_CHECKING:
    from pinecall_loadlab.livekit.config import StandInConfig
    from pinecall_loadlab.livekit.rooms import RoomManager
    from pinecall_loadlab.livekit.tokens import KeyRing

DENIED = TwirpError("unauthenticated", "permissions denied")
SIP_TOKEN_TTL = datetime.timedelta(hours=6)


def _admin(c: Claims | None) -> None:
    if not (c and c.sip and c.sip.admin):
        raise DENIED


def _call(c: Claims | None) -> None:
    if not (c and c.sip and (c.sip.call or c.sip.admin)):
        raise DENIED


@dataclass(frozen=True, kw_only=True)
class DialIn:
    """An inbound call routed: where it went and the token its caller joins with."""

    call_id: str
    room: str
    identity: str
    token: str
    trunk_id: str
    rule_id: str


class SipService:
    """The SIP service's state (trunks, rules, legs) and its Twirp methods."""

    def __init__(self, config: StandInConfig, rooms: RoomManager, keys: KeyRing) -> None:
        self.config, self.rooms, self.keys = config, rooms, keys
        self.store = st.SipStore()
        self.callees: dict[str, Callee] = {}
        self.anyone: Callee | None = None
        """How a number neither set in `callees` nor a test number answers (the lab control's
        ``PUT …/sip/callee``); None: it picks up after `StandInConfig.sip_ring_s` and never
        hangs up."""
        """Dialled number (normalized) → how it answers; see `callee_for`."""
        self.legs: dict[str, Leg] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def routes(self) -> Routes:
        """This service's entries for `Twirp.routes`."""
        svc = "livekit.SIP"
        return {
            (svc, "CreateSIPInboundTrunk"): (lsip.CreateSIPInboundTrunkRequest, self.create_in),
            (svc, "CreateSIPOutboundTrunk"): (lsip.CreateSIPOutboundTrunkRequest, self.create_out),
            (svc, "ListSIPInboundTrunk"): (lsip.ListSIPInboundTrunkRequest, self.list_in),
            (svc, "ListSIPOutboundTrunk"): (lsip.ListSIPOutboundTrunkRequest, self.list_out),
            (svc, "DeleteSIPTrunk"): (lsip.DeleteSIPTrunkRequest, self.delete_trunk),
            (svc, "CreateSIPDispatchRule"): (lsip.CreateSIPDispatchRuleRequest, self.create_rule),
            (svc, "ListSIPDispatchRule"): (lsip.ListSIPDispatchRuleRequest, self.list_rules),
            (svc, "DeleteSIPDispatchRule"): (lsip.DeleteSIPDispatchRuleRequest, self.delete_rule),
            (svc, "CreateSIPParticipant"): (lsip.CreateSIPParticipantRequest, self.create_part),
        }

    async def aclose(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    # -- trunks and rules ----------------------------------------------------------------------

    async def create_in(
        self, req: lsip.CreateSIPInboundTrunkRequest, c: Claims | None, _: web.Request
    ) -> Message:
        _admin(c)
        return self.store.add_inbound(req.trunk)

    async def create_out(
        self, req: lsip.CreateSIPOutboundTrunkRequest, c: Claims | None, _: web.Request
    ) -> Message:
        _admin(c)
        return self.store.add_outbound(req.trunk)

    async def list_in(
        self, req: lsip.ListSIPInboundTrunkRequest, c: Claims | None, _: web.Request
    ) -> Message:
        _admin(c)
        items = st.select(self.store.inbound.values(), req.trunk_ids, req.numbers)
        return lsip.ListSIPInboundTrunkResponse(items=items)

    async def list_out(
        self, req: lsip.ListSIPOutboundTrunkRequest, c: Claims | None, _: web.Request
    ) -> Message:
        _admin(c)
        return lsip.ListSIPOutboundTrunkResponse(
            items=st.select(self.store.outbound.values(), req.trunk_ids, req.numbers)
        )

    async def delete_trunk(
        self, req: lsip.DeleteSIPTrunkRequest, c: Claims | None, _: web.Request
    ) -> Message:
        _admin(c)
        return self.store.delete_trunk(req.sip_trunk_id)

    async def create_rule(
        self, req: lsip.CreateSIPDispatchRuleRequest, c: Claims | None, _: web.Request
    ) -> Message:
        _admin(c)
        return self.store.add_rule(st.upgrade_rule(req))

    async def list_rules(
        self, req: lsip.ListSIPDispatchRuleRequest, c: Claims | None, _: web.Request
    ) -> Message:
        _admin(c)
        want_ids, want_trunks = set(req.dispatch_rule_ids), set(req.trunk_ids)
        found = [
            r
            for r in self.store.rules.values()
            if (not want_ids or r.sip_dispatch_rule_id in want_ids)
            and (not want_trunks or not r.trunk_ids or want_trunks & set(r.trunk_ids))
        ]
        return lsip.ListSIPDispatchRuleResponse(items=found)

    async def delete_rule(
        self, req: lsip.DeleteSIPDispatchRuleRequest, c: Claims | None, _: web.Request
    ) -> Message:
        _admin(c)
        return self.store.delete_rule(req.sip_dispatch_rule_id)

    # -- outbound ------------------------------------------------------------------------------

    def callee_for(self, number: str) -> Callee:
        """How `number` answers: as set by `callees` (the lab control), else a magic test number
        (`legs.magic_callee`), else as `anyone` does, else it picks up after
        `StandInConfig.sip_ring_s`."""
        n = st.normalize(number)
        return (
            self.callees.get(n)
            or magic_callee(n)
            or self.anyone
            or Callee(ring_s=self.config.sip_ring_s)
        )

    async def create_part(
        self, req: lsip.CreateSIPParticipantRequest, c: Claims | None, _: web.Request
    ) -> Message:
        """Dial `sip_call_to` through outbound trunk `sip_trunk_id` into `room_name`; answers at
        once, or once the callee picks up with ``wait_until_answered`` (then a failure is a
        Twirp error with ``sip_status_code`` / ``sip_status`` meta)."""
        _call(c)
        if req.HasField("trunk"):
            raise TwirpError("invalid_argument", "the stand-in dials only by sip_trunk_id")
        for field in ("play_dialtone", "play_ringtone", "dtmf"):
            if getattr(req, field):
                raise TwirpError("invalid_argument", f"{field} is not modelled by the stand-in")
        if not req.sip_trunk_id:
            raise TwirpError("invalid_argument", "missing sip trunk id")
        if not req.sip_call_to:
            raise TwirpError("invalid_argument", "missing sip callee number")
        if not req.room_name:
            raise TwirpError("invalid_argument", "missing room name")
        trunk = self.store.outbound.get(req.sip_trunk_id)
        if trunk is None:
            raise TwirpError("not_found", "requested sip trunk does not exist")
        number = req.sip_number or (trunk.numbers[0] if trunk.numbers else "")
        if not number:
            raise TwirpError("failed_precondition", "no numbers on outbound trunk")
        call_id = ids.new_id(st.CALL)
        attrs = dict(req.participant_attributes)
        attrs.update({"sip.callID": call_id, "sip.trunkID": trunk.sip_trunk_id})
        if not req.hide_phone_number:
            attrs.update(
                {
                    "sip.phoneNumber": req.sip_call_to,
                    "sip.hostname": trunk.address,
                    "sip.trunkPhoneNumber": number,
                }
            )
        attrs[STATUS_ATTR] = "dialing"
        info = models.ParticipantInfo(
            identity=req.participant_identity or f"sip_{req.sip_call_to}",
            name=req.participant_name,
            metadata=req.participant_metadata,
            kind=models.ParticipantInfo.Kind.SIP,
        )
        info.attributes.update(attrs)
        room, _created = self.rooms.create_room(req.room_name)
        ring_timeout = req.ringing_timeout.seconds or self.config.sip_ringing_timeout_s
        leg = Leg(
            call_id=call_id,
            room=room,
            participant=self.rooms.join(room, info, None),
            callee=self.callee_for(req.sip_call_to),
            ringing_timeout_s=float(ring_timeout),
            max_call_s=float(req.max_call_duration.seconds) or None,
            rooms=self.rooms,
            media_timeout_s=self.config.sip_media_timeout_s,
        )
        leg.participant.link = leg
        self.legs[call_id] = leg
        self.rooms.dispatcher.events.append(
            ev.SipCallStarted(
                call_id=call_id,
                direction="outbound",
                room=room.name,
                identity=info.identity,
                from_number=number,
                to_number=req.sip_call_to,
                trunk_id=trunk.sip_trunk_id,
            )
        )
        task = asyncio.create_task(leg.run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        if req.wait_until_answered:
            await asyncio.shield(leg.answered)  # a TwirpError when the callee did not pick up
        return lsip.SIPParticipantInfo(
            participant_id=info.sid,
            participant_identity=info.identity,
            room_name=room.name,
            sip_call_id=call_id,
        )

    # -- inbound -------------------------------------------------------------------------------

    def dial_in(self, caller: str, called: str, pin: str = "") -> DialIn:
        """A phone at `caller` rings `called` (having entered `pin`, if any): the room, identity
        and join token LiveKit SIP would use. `store.NoMatch` when no trunk or rule takes it
        (LiveKit SIP answers the INVITE 404)."""
        match = self.store.match(caller, called, pin)
        rule = match.rule
        trunk_id = match.trunk.sip_trunk_id if match.trunk is not None else ""
        call_id = ids.new_id(st.CALL)
        attrs = dict(rule.attributes)
        attrs.update(
            {
                "sip.callID": call_id,
                "sip.trunkID": trunk_id,
                "sip.ruleID": rule.sip_dispatch_rule_id,
                STATUS_ATTR: "active",
            }
        )
        if rule.hide_phone_number:
            digest = hashlib.sha256(caller.encode()).hexdigest()[:16]
            identity, name = f"sip_{digest}", f"Phone {caller[-4:]}"
        else:
            identity, name = f"sip_{caller}", f"Phone {caller}"
            attrs.update({"sip.phoneNumber": caller, "sip.trunkPhoneNumber": called})
        room = st.room_for(rule, caller, called)
        key = self.keys.webhook_key
        tok = (
            api.AccessToken(key, self.keys.secret(key))
            .with_identity(identity)
            .with_name(name)
            .with_kind("sip")
            .with_metadata(rule.metadata)
            .with_attributes(attrs)
            .with_ttl(SIP_TOKEN_TTL)
            .with_grants(
                api.VideoGrants(room_join=True, room=room, can_publish=True, can_subscribe=True)
            )
        )
        if rule.HasField("room_config"):
            tok = tok.with_room_config(rule.room_config)
        self.rooms.dispatcher.events.append(
            ev.SipCallStarted(
                call_id=call_id,
                direction="inbound",
                room=room,
                identity=identity,
                from_number=caller,
                to_number=called,
                trunk_id=trunk_id,
                rule_id=rule.sip_dispatch_rule_id,
            )
        )
        return DialIn(
            call_id=call_id,
            room=room,
            identity=identity,
            token=tok.to_jwt(),
            trunk_id=trunk_id,
            rule_id=rule.sip_dispatch_rule_id,
        )
