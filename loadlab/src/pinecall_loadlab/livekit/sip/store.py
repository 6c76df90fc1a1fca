"""SIP trunks and dispatch rules as LiveKit keeps them, and which ones an inbound call meets.

Follows livekit/protocol `sip/sip.go` (`ValidateTrunks`, `ValidateDispatchRules`,
`DispatchRulePriority`, `MatchTrunk`, `EvaluateDispatchRule`) and `livekit/sip.go`
(`NormalizeNumber`):

- an inbound trunk without ``allowed_numbers`` may not share a number with another such trunk
  (``invalid_argument`` "Conflicting inbound SIP Trunks"); trunks with ``allowed_numbers`` conflict
  only on the same (number, allowed number) pair;
- two dispatch rules may not share (trunk, caller number, called number, PIN): an empty list
  stands for "any" and collides only with another empty one (``invalid_argument``);
- an inbound call meets the trunk holding the called number (a trunk with no numbers is the
  default), then the highest-priority rule for that trunk and those numbers: PIN rules first, then
  Direct, Individual, Callee; a rule naming caller or called numbers before one that does not.

Errors are `TwirpError`s, as the real service answers them.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TypeVar

from livekit.protocol import sip

from pinecall_loadlab.livekit import ids
from pinecall_loadlab.livekit.twirp import TwirpError

TRUNK = "ST_"
RULE = "SDR_"
CALL = "SCL_"
"""`utils/guid/id.go` prefixes: SIP trunk, dispatch rule, call."""


_NUMBER = re.compile(r"^\+?[\d\- ()]+$")


def normalize(number: str) -> str:
    """`NormalizeNumber`: a phone number (digits, an optional ``+``, spaces, dashes, brackets)
    loses its spaces, dashes and brackets and gains a leading ``+``; anything else (a SIP user,
    ``""``) is kept as it is."""
    if not _NUMBER.match(number):
        return number
    cleaned = re.sub(r"[\- ()]", "", number)
    return cleaned if cleaned.startswith("+") else "+" + cleaned


def _now_s() -> int:
    return int(time.time())


def upgrade_rule(req: sip.CreateSIPDispatchRuleRequest) -> sip.SIPDispatchRuleInfo:
    """The rule a create request describes: its ``dispatch_rule`` or, from older clients, the
    request's own fields (`livekit_sip.proto`, ``CreateSIPDispatchRuleRequest``)."""
    if req.HasField("dispatch_rule"):
        info = sip.SIPDispatchRuleInfo()
        info.CopyFrom(req.dispatch_rule)
        return info
    info = sip.SIPDispatchRuleInfo(
        trunk_ids=list(req.trunk_ids),
        hide_phone_number=req.hide_phone_number,
        inbound_numbers=list(req.inbound_numbers),
        name=req.name,
        metadata=req.metadata,
        room_preset=req.room_preset,
    )
    info.rule.CopyFrom(req.rule)
    info.attributes.update(req.attributes)
    if req.HasField("room_config"):
        info.room_config.CopyFrom(req.room_config)
    return info


def rule_pin(rule: sip.SIPDispatchRuleInfo) -> str:
    """The rule's PIN, ``""`` if open; `invalid_argument` when it has no rule at all."""
    kind = rule.rule.WhichOneof("rule")
    if kind is None:
        raise TwirpError("invalid_argument", "dispatch rule is missing")
    return str(getattr(rule.rule, kind).pin)


def priority(rule: sip.SIPDispatchRuleInfo) -> int:
    """`DispatchRulePriority`: lower is preferred."""
    kind = rule.rule.WhichOneof("rule")
    base = {"dispatch_rule_direct": 0, "dispatch_rule_individual": 1, "dispatch_rule_callee": 2}
    if kind is None:
        return 2**31 - 1
    p = base[kind] + (0 if rule_pin(rule) else 100)
    p += 0 if rule.inbound_numbers else 1000
    p += 0 if rule.numbers else 1000
    return p


@dataclass(frozen=True, kw_only=True)
class Match:
    """What an inbound call met: the trunk and the rule (`MatchTrunk` + `SelectDispatchRule`)."""

    trunk: sip.SIPInboundTrunkInfo | None
    rule: sip.SIPDispatchRuleInfo


class NoMatch(Exception):
    """No trunk or no rule takes the call (`ErrNoDispatchMatched`): LiveKit SIP answers 404."""


class SipStore:
    """The project's trunks and rules (one project: the stand-in's keys share them)."""

    def __init__(self) -> None:
        self.inbound: dict[str, sip.SIPInboundTrunkInfo] = {}
        self.outbound: dict[str, sip.SIPOutboundTrunkInfo] = {}
        self.rules: dict[str, sip.SIPDispatchRuleInfo] = {}

    # -- trunks --------------------------------------------------------------------------------

    def add_inbound(self, trunk: sip.SIPInboundTrunkInfo) -> sip.SIPInboundTrunkInfo:
        """Store a new inbound trunk with a fresh id; `invalid_argument` if it names an id or
        conflicts with a stored trunk (`validateTrunkInbound`)."""
        if trunk.sip_trunk_id:
            raise TwirpError("invalid_argument", "trunk ID must be empty")
        t = sip.SIPInboundTrunkInfo()
        t.CopyFrom(trunk)
        t.sip_trunk_id = ids.new_id(TRUNK)
        t.created_at.seconds = t.updated_at.seconds = _now_s()
        for other in self.inbound.values():
            shared = {normalize(n) for n in t.numbers} & {normalize(n) for n in other.numbers}
            if not shared and (t.numbers or other.numbers):
                continue
            mine = {normalize(n) for n in t.allowed_numbers} or {""}
            theirs = {normalize(n) for n in other.allowed_numbers} or {""}
            if mine & theirs:
                raise TwirpError(
                    "invalid_argument",
                    f'Conflicting inbound SIP Trunks: "{t.sip_trunk_id}" and '
                    f'"{other.sip_trunk_id}", using the same number(s) {sorted(shared)}',
                )
        self.inbound[t.sip_trunk_id] = t
        return t

    def add_outbound(self, trunk: sip.SIPOutboundTrunkInfo) -> sip.SIPOutboundTrunkInfo:
        """Store a new outbound trunk; `invalid_argument` without an address or with an id."""
        if trunk.sip_trunk_id:
            raise TwirpError("invalid_argument", "trunk ID must be empty")
        if not trunk.address:
            raise TwirpError("invalid_argument", "no trunk address specified")
        t = sip.SIPOutboundTrunkInfo()
        t.CopyFrom(trunk)
        t.sip_trunk_id = ids.new_id(TRUNK)
        t.created_at.seconds = t.updated_at.seconds = _now_s()
        self.outbound[t.sip_trunk_id] = t
        return t

    def delete_trunk(self, trunk_id: str) -> sip.SIPTrunkInfo:
        """Remove either kind of trunk; `not_found` if neither holds `trunk_id`."""
        if (t_in := self.inbound.pop(trunk_id, None)) is not None:
            return sip.SIPTrunkInfo(
                sip_trunk_id=t_in.sip_trunk_id,
                kind=sip.SIPTrunkInfo.TrunkKind.TRUNK_INBOUND,
                inbound_numbers=list(t_in.numbers),
                name=t_in.name,
                metadata=t_in.metadata,
            )
        if (t_out := self.outbound.pop(trunk_id, None)) is not None:
            return sip.SIPTrunkInfo(
                sip_trunk_id=t_out.sip_trunk_id,
                kind=sip.SIPTrunkInfo.TrunkKind.TRUNK_OUTBOUND,
                outbound_address=t_out.address,
                name=t_out.name,
                metadata=t_out.metadata,
            )
        raise TwirpError("not_found", "requested sip trunk does not exist")

    # -- dispatch rules ------------------------------------------------------------------------

    def add_rule(self, rule: sip.SIPDispatchRuleInfo) -> sip.SIPDispatchRuleInfo:
        """Store a new rule with a fresh id; `invalid_argument` without a rule or when another
        rule holds the same (PIN, trunk, caller number, called number) (`ValidateDispatchRules`)."""
        if rule.sip_dispatch_rule_id:
            raise TwirpError("invalid_argument", "rule ID must be empty")
        r = sip.SIPDispatchRuleInfo()
        r.CopyFrom(rule)
        r.sip_dispatch_rule_id = ids.new_id(RULE)
        r.created_at.seconds = r.updated_at.seconds = _now_s()
        keys = self._keys(r)
        for other in self.rules.values():
            if keys & self._keys(other):
                raise TwirpError(
                    "invalid_argument",
                    "Dispatch rule for the same trunk, inbound number, number, and PIN "
                    f'combination already exists in dispatch rule "{other.sip_dispatch_rule_id}" '
                    f'"{other.name}"',
                )
        self.rules[r.sip_dispatch_rule_id] = r
        return r

    @staticmethod
    def _keys(r: sip.SIPDispatchRuleInfo) -> set[tuple[str, str, str, str]]:
        pin = rule_pin(r)
        return {
            (pin, trunk, normalize(inbound), normalize(number))
            for trunk in (list(r.trunk_ids) or [""])
            for inbound in (list(r.inbound_numbers) or [""])
            for number in (list(r.numbers) or [""])
        }

    def delete_rule(self, rule_id: str) -> sip.SIPDispatchRuleInfo:
        """Remove a rule; `not_found` if none has `rule_id`."""
        r = self.rules.pop(rule_id, None)
        if r is None:
            raise TwirpError("not_found", "requested sip dispatch rule does not exist")
        return r

    # -- an inbound call -----------------------------------------------------------------------

    def match(self, caller: str, called: str, pin: str = "") -> Match:
        """The trunk and rule a call from `caller` to `called` (with `pin` entered, if any)
        meets; `NoMatch` when none does."""
        caller, called = normalize(caller), normalize(called)
        trunk = None
        default = None
        for t in self.inbound.values():
            allowed = {normalize(n) for n in t.allowed_numbers}
            if allowed and caller not in allowed:
                continue
            if not t.numbers:
                default = default or t
            elif called in {normalize(n) for n in t.numbers}:
                trunk = t
                break
        trunk = trunk or default
        if trunk is None and self.inbound:
            raise NoMatch(f'No SIP Trunk or Dispatch Rules matched for "{called}"')
        trunk_id = trunk.sip_trunk_id if trunk is not None else ""
        candidates = [
            r
            for r in self.rules.values()
            if (not r.trunk_ids or trunk_id in r.trunk_ids)
            and (not r.inbound_numbers or caller in {normalize(n) for n in r.inbound_numbers})
            and (not r.numbers or called in {normalize(n) for n in r.numbers})
            and rule_pin(r) in ("", pin)
        ]
        if not candidates:
            raise NoMatch(f'No SIP Dispatch Rules matched for "{called}"')
        best = min(candidates, key=lambda r: (priority(r), r.sip_dispatch_rule_id))
        return Match(trunk=trunk, rule=best)


TrunkT = TypeVar("TrunkT", sip.SIPInboundTrunkInfo, sip.SIPOutboundTrunkInfo)


def select(
    items: Iterable[TrunkT], trunk_ids: Iterable[str], numbers: Iterable[str]
) -> list[TrunkT]:
    """`ListSIP*Trunk` filters: by id, and by any of `numbers` (normalized)."""
    want_ids, want_numbers = set(trunk_ids), {normalize(n) for n in numbers}
    return [
        t
        for t in items
        if (not want_ids or t.sip_trunk_id in want_ids)
        and (not want_numbers or want_numbers & {normalize(n) for n in t.numbers})
    ]


def room_for(rule: sip.SIPDispatchRuleInfo, caller: str, called: str) -> str:
    """`EvaluateDispatchRule`'s room name: Direct → its room; Individual → ``prefix_caller``
    (+ ``_`` + 12 random characters unless ``no_randomness``); Callee → ``prefix_called`` (+ the
    same when ``randomize``)."""
    kind = rule.rule.WhichOneof("rule")
    if kind == "dispatch_rule_direct":
        return rule.rule.dispatch_rule_direct.room_name
    if kind == "dispatch_rule_individual":
        ind = rule.rule.dispatch_rule_individual
        room = f"{ind.room_prefix}_{caller}" if ind.room_prefix else caller
        return room if ind.no_randomness else f"{room}_{ids.new_id('')}"
    callee = rule.rule.dispatch_rule_callee
    room = f"{callee.room_prefix}_{called}" if callee.room_prefix else called
    return f"{room}_{ids.new_id('')}" if callee.randomize else room
