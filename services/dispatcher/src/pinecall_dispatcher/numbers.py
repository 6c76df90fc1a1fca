"""An org's phone numbers (issue 18, "Numbers"): each rings one agent in one environment.

``DESIGN.md``: the dispatcher owns phone numbers. For each it keeps, on its environment's
LiveKit (the fleets row's ``livekit_url``, :mod:`pinecall_dispatcher.livekit`), an inbound SIP
trunk holding the number and an Individual dispatch rule of that trunk that puts each caller in
a room of their own (``call_<caller>_<random>``) with a dispatch to the fleet's plain name whose
metadata is a ``CallRing`` naming the org and agent. LiveKit keeps that dispatch pending and the
dispatcher places the call as every call (:mod:`pinecall_dispatcher.placing`).

A put, in order, makes nothing when it is refused:

1. the number is E.164, else 422 ``invalid_number``;
2. a number held by another org, environment or agent: 409 ``number_taken`` (an org never learns
   who holds it); the same put again answers the number as it stands;
3. the agent exists (call-log, :class:`~pinecall_dispatcher.agents.Agents`), else 422
   ``unknown_agent``; call-log not answering is 503 here (this is no ring: nothing fails open);
4. a fleet serves the environment, else 503 ``no_fleet``;
5. the number is claimed (its row, the table's key: one of two concurrent puts wins), then the
   trunk and the rule are made on LiveKit. LiveKit refusing (another trunk already holds the
   number: 409 ``number_taken``) or not answering (503 ``livekit_unavailable``) undoes what was
   made, the claim included. A put that stopped midway (a replica gone) leaves its claim; the
   same put again finishes it.

A remove deletes the rule, the trunk, then the row; LiveKit not answering leaves the row so the
remove can be asked again (a rule or trunk already gone is not an error). Another org's number
reads as unknown: 404.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from pinecall_clients.errors import LiveKitError, LiveKitRefused, LiveKitUnavailable
from pinecall_clients.livekit import LiveKit
from pinecall_contracts.base import encode
from pinecall_contracts.dispatch import CallRing
from pinecall_contracts.ids import E164_PATTERN
from pinecall_contracts.phones import PhoneNumber, PhoneNumberList
from pinecall_dispatcher.admission import unknown_agent
from pinecall_dispatcher.agents import Agents
from pinecall_dispatcher.livekit import LiveKits
from pinecall_dispatcher.roster import RosterView
from pinecall_dispatcher.store import Store
from pinecall_servicekit.errors import Conflict, NotFound, Unavailable, Unprocessable

_log = logging.getLogger(__name__)
_E164 = re.compile(E164_PATTERN)
ROOM_PREFIX = "call"
"""A number's callers' rooms are ``call_<caller>_<random>`` (LiveKit's Individual rule)."""


class InvalidNumber(Unprocessable):
    code = "invalid_number"


class NumberTaken(Conflict):
    code = "number_taken"


class NoFleet(Unavailable):
    code = "no_fleet"


class LiveKitDown(Unavailable):
    code = "livekit_unavailable"


def checked(number: str) -> str:
    """``number`` if it is E.164 (``+15550100``); ``InvalidNumber`` (422) otherwise."""
    if not _E164.match(number):
        raise InvalidNumber(
            f"{number!r} is not an E.164 number: a + then 7 to 15 digits, no leading 0 (+15550100)",
            errors=[{"message": "not E.164", "key": "number", "source": "path"}],
        )
    return number


def _answer(row: dict[str, Any]) -> PhoneNumber:
    return PhoneNumber(
        number=row["number"],
        org=row["org"],
        environment=row["environment"],
        agent=row["agent"],
        fleet=row["fleet"],
        trunk_id=row["trunk_id"] or "",
        rule_id=row["rule_id"] or "",
        created_at=row["created_at"],
    )


def _taken(number: str, held: dict[str, Any], org: str, environment: str) -> NumberTaken:
    """409 for ``number``, ``held`` by another agent, environment or org: where it rings when it
    is the asker's own org's, else only that another org holds it (who is not said)."""
    if held["org"] != org:
        return NumberTaken(f"{number} is held by another org: a number rings one org's agent")
    if held["environment"] != environment:
        return NumberTaken(
            f"{number} already rings {held['agent']} in {held['environment']}: a number rings "
            f"one agent in one environment; remove it there first (DELETE "
            f"/v1/phone-numbers/{number} in {held['environment']})"
        )
    return NumberTaken(
        f"{number} already rings {held['agent']}: remove it first "
        f"(DELETE /v1/phone-numbers/{number})"
    )


class Numbers:
    """The numbers of every org, kept in the store and on each environment's LiveKit."""

    def __init__(
        self, store: Store, livekits: LiveKits, roster: RosterView, agents: Agents
    ) -> None:
        self.store, self.livekits, self.roster, self.agents = store, livekits, roster, agents

    async def put(self, number: str, org: str, environment: str, agent: str) -> PhoneNumber:
        """Tie ``number`` to ``org``'s ``agent`` in ``environment``; errors as the module says."""
        checked(number)
        held = await self.store.numbers.get(number)
        mine = held is not None and (held["org"], held["environment"], held["agent"]) == (
            org,
            environment,
            agent,
        )
        if held is not None and not mine:
            raise _taken(number, held, org, environment)
        if held is not None and held["trunk_id"]:
            return _answer(held)
        known = await self.agents.lookup(environment, org, agent)
        if known == "unknown":
            raise unknown_agent(agent, org, environment)
        if known == "unanswered":
            raise Unavailable(f"call-log did not say whether agent {agent} of {org} exists")
        fleet = await self.roster.fleet_of(environment)
        if fleet is None:
            raise NoFleet(f"no fleet serves {environment}: its numbers cannot be placed")
        wanted = {
            "number": number,
            "org": org,
            "environment": environment,
            "agent": agent,
            "fleet": fleet.name,
            "livekit_url": fleet.livekit_url,
        }
        row, claimed = await self.store.numbers.claim(wanted)
        async with self.store.numbers.making(number):  # one put at a time makes them
            if not claimed:  # read again under the lock: another put may have made or forgot it
                again = await self.store.numbers.get(number)
                if again is None:  # the put before failed and forgot it: this one claims it
                    row, claimed = await self.store.numbers.claim(wanted)
                else:
                    row = again
            if (row["org"], row["environment"], row["agent"]) != (org, environment, agent):
                raise _taken(number, row, org, environment)  # another put claimed it meanwhile
            if row["trunk_id"]:
                return _answer(row)
            try:
                made = await self._make(row, resumed=not claimed)
            except Exception:
                if claimed:
                    await self.store.numbers.forget(number)
                raise
        return _answer(made)

    async def _make(self, row: dict[str, Any], *, resumed: bool) -> dict[str, Any]:
        """Make the trunk and rule of a claimed ``row``; `resumed`: a put that stopped midway
        (its replica died) left it, and a trunk of ours it made is deleted first."""
        number, org = row["number"], row["org"]
        lk = self.livekits.of(row["environment"], row["livekit_url"])
        name = f"pinecall {org} {number}"
        ring = encode(CallRing(agent=row["agent"], org=org, caller="sip")).decode()
        try:
            if resumed:
                for left, its_name in (await lk.inbound_trunks(number)).items():
                    if its_name == name:
                        await lk.delete_trunk(left)
            trunk = await lk.create_inbound_trunk(number, name=name, metadata=ring)
        except LiveKitRefused as exc:
            raise NumberTaken(f"LiveKit already holds {number} on another trunk: {exc}") from exc
        except LiveKitUnavailable as exc:
            raise LiveKitDown(f"{number} not set up: {exc}") from exc
        try:
            rule = await lk.create_dispatch_rule(
                trunk, agent_name=row["fleet"], ring=ring, name=name, room_prefix=ROOM_PREFIX
            )
            return await self.store.numbers.made(number, trunk, rule)
        except Exception as exc:
            await self._undo(lk, trunk)
            if isinstance(exc, LiveKitRefused):
                raise NumberTaken(f"LiveKit refused {number}'s dispatch rule: {exc}") from exc
            if isinstance(exc, LiveKitError):
                raise LiveKitDown(f"{number} not set up: {exc}") from exc
            raise

    async def _undo(self, lk: LiveKit, trunk: str) -> None:
        try:
            await lk.delete_trunk(trunk)
        except LiveKitError as exc:  # said: an operator removes it by hand
            _log.error("trunk %s left on %s after a failed put: %s", trunk, lk.access.url, exc)

    async def remove(self, number: str, org: str, environment: str) -> PhoneNumber:
        """Remove ``org``'s ``number``: its rule and trunk on LiveKit, then its row. ``NotFound``
        for a number the org does not hold there; ``LiveKitDown`` (the row kept)."""
        row = await self._of(number, org, environment)
        lk = self.livekits.of(environment, row["livekit_url"])
        try:
            if row["rule_id"]:
                await lk.delete_dispatch_rule(row["rule_id"])
            if row["trunk_id"]:
                await lk.delete_trunk(row["trunk_id"])
        except LiveKitError as exc:
            raise LiveKitDown(f"{number} not removed (ask again): {exc}") from exc
        await self.store.numbers.forget(number)
        return _answer(row)

    async def get(self, number: str, org: str, environment: str) -> PhoneNumber:
        """``org``'s ``number`` in ``environment``; ``NotFound`` otherwise."""
        return _answer(await self._of(number, org, environment))

    async def of_org(self, org: str, environment: str) -> PhoneNumberList:
        """``org``'s numbers in ``environment``."""
        rows = await self.store.numbers.of(org, environment)
        return PhoneNumberList(org=org, environment=environment, numbers=[_answer(r) for r in rows])

    async def _of(self, number: str, org: str, environment: str) -> dict[str, Any]:
        checked(number)
        row = await self.store.numbers.get(number)
        if row is None or (row["org"], row["environment"]) != (org, environment):
            raise NotFound(f"{org} has no number {number} in {environment}")
        return row
