"""``up``'s outbound calls (issue 18, acceptance 6): placed as an app places them, each request
sent twice, and counted from the phone network's side.

Before any is placed, each environment's LiveKit stand-in gets the outbound trunk the dispatcher
dials through (``pinecall-outbound``, made with livekit-api's ``SipService`` as an operator
makes theirs), and every phone it dials that is not a test number is told how to answer (the
stand-in's SIP control API, ``/lab/control/sip/callee``: a person who hangs up after
:data:`HANGUP_AFTER_S`; the callers the follow-ups call back too).
Then ``count`` calls of the callers' agent are placed with ``POST /v1/calls/outbound`` at
``rate`` a second, the environments in turn, the numbers of :data:`PLAN` in turn (answered, busy,
answered, never answered, a trunk that fails); every request is sent a second time with the same
``id``, as an app retries one whose answer it lost, and must get the same call.

Counted (:meth:`Outbound.counts`): *placed* (the dispatcher answered a call), *refused* (the
dispatcher's admission said no: the fleet full, not ready, the org's quota — line health, as a
visitor's refusal, not a problem), *dialled* (the stand-in holds a SIP leg of its room),
*answered* (a leg picked up, ``200``), *not reached* (the log ended it ``not_reached``) and how
many of those :data:`PLAN` meant not to be (its busy, never answered and failing numbers: a
healthy run's not reached are these), *dialled twice* (a room with more than one leg: a
problem), and *ended* (its ``call.ended`` heard).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
from livekit import api

from pinecall_runtime.up.stage import ENVIRONMENTS, Run

_log = logging.getLogger(__name__)
TRUNK = "pinecall-outbound"
"""The dispatcher's default ``PINECALL_OUTBOUND_TRUNK``."""
HANGUP_AFTER_S = 8.0
"""How long a callee who picks up listens before it hangs up (the greeting and a little more)."""
PLAN = (
    ("+14155550100", "answered"),
    ("+15005550486", "busy"),
    ("+14155550101", "answered"),
    ("+15005550000", "unanswered"),
    ("+15005550503", "failed"),
)
"""The numbers dialled in turn, and what each does: the stand-in's ``+15005550XXX`` numbers
answer with SIP status XXX (``000``: never)."""


@dataclass
class Placed:
    """One outbound request, sent twice."""

    environment: str
    id: str
    to: str
    expect: str
    call: str | None = None
    room: str | None = None
    statuses: list[int] = field(default_factory=list)
    """The dispatcher's answers to the two sends (201, then 200)."""
    same: bool = True
    """Whether the second send answered the first's call."""
    error: str | None = None
    refused: str | None = None
    """The admission's refusal (``fleet_full``, ``not_ready``, ``too_many_requests``), if any."""


REFUSALS = frozenset({"fleet_full", "not_ready", "too_many_requests"})
"""The problem codes of admission's refusals (``pinecall_dispatcher.admission``)."""


class Outbound:
    """Places ``count`` outbound calls of ``org``'s ``agent`` during a run."""

    def __init__(self, run: Run, livekit: dict[str, str], dispatcher: str, *, agent: str,
                 org: str, count: int, rate: float) -> None:  # fmt: skip
        self.run, self.livekit, self.dispatcher = run, livekit, dispatcher
        self.agent, self.org, self.count, self.rate = agent, org, count, rate
        self.placed: list[Placed] = []

    def _control(self, environment: str) -> httpx.AsyncClient:
        key, secret = self.run.livekit_keys[environment]
        token = api.AccessToken(key, secret).with_identity("up").to_jwt()
        return httpx.AsyncClient(
            base_url=f"{self.livekit[environment]}/lab/control/sip",
            headers={"Authorization": f"Bearer {token}"},
            timeout=10.0,
        )

    async def prepare(self) -> None:
        """Each environment's outbound trunk, and how its numbers answer."""
        for environment in ENVIRONMENTS:
            key, secret = self.run.livekit_keys[environment]
            async with api.LiveKitAPI(self.livekit[environment], key, secret) as lk:
                have = await lk.sip.list_outbound_trunk(api.ListSIPOutboundTrunkRequest())
                if not any(t.name == TRUNK for t in have.items):
                    trunk = api.SIPOutboundTrunkInfo(
                        name=TRUNK, address="sip.up.invalid", numbers=["+15550000000"]
                    )
                    await lk.sip.create_outbound_trunk(
                        api.CreateSIPOutboundTrunkRequest(trunk=trunk)
                    )
            async with self._control(environment) as control:
                # every phone not a test number (PLAN's answered ones, and the callers the
                # dispatcher's follow-ups call back) picks up and hangs up by itself
                r = await control.put("/callee", json={"hangup_after_s": HANGUP_AFTER_S})
                r.raise_for_status()

    async def place(self) -> None:
        """Place every call at ``rate`` a second, each request sent twice."""
        environments = itertools.cycle(ENVIRONMENTS)
        plan = itertools.cycle(PLAN)
        async with httpx.AsyncClient(base_url=self.dispatcher, timeout=30.0) as http:
            for n in range(self.count):
                environment, (to, expect) = next(environments), next(plan)
                placed = Placed(environment=environment, id=f"up-out-{n}", to=to, expect=expect)
                self.placed.append(placed)
                await self._send_twice(http, placed)
                await asyncio.sleep(1 / self.rate)  # the callers' own pace

    async def _send_twice(self, http: httpx.AsyncClient, placed: Placed) -> None:
        body = {"agent": self.agent, "org": self.org, "to": placed.to, "id": placed.id,
                "context": {"campaign": "up", "expect": placed.expect}}  # fmt: skip
        headers = {"Authorization": f"Bearer {self.run.app_keys[placed.environment]}"}
        calls = []
        for _ in range(2):
            try:
                r = await http.post("/v1/calls/outbound", json=body, headers=headers)
            except httpx.HTTPError as exc:
                placed.error = f"not answered: {exc!r}"
                return
            placed.statuses.append(r.status_code)
            if r.status_code not in (200, 201):
                code = r.json().get("code")
                if code in REFUSALS:
                    placed.refused = code
                else:
                    placed.error = f"{r.status_code} {code}: {r.json().get('detail')}"
                return
            calls.append(r.json()["call"])
            placed.room = r.json()["room"]
        placed.call, placed.same = calls[0], len(set(calls)) == 1

    async def legs(self) -> list[dict[str, Any]]:
        """Every outbound SIP leg the stand-ins made (their control API)."""
        found: list[dict[str, Any]] = []
        for environment in ENVIRONMENTS:
            async with self._control(environment) as control:
                r = await control.get("/calls")
                r.raise_for_status()
                found += r.json()
        return found

    def counts(self, legs: list[dict[str, Any]], ended: Mapping[str, str | None]) -> dict[str, Any]:
        """The report's ``outbound`` (the module docstring); ``ended``: call → its outcome."""
        rooms = {p.room for p in self.placed if p.room}
        per_room = Counter(leg["room"] for leg in legs if leg["room"] in rooms)
        calls = [p.call for p in self.placed if p.call]
        outcomes = Counter(ended[c] for c in calls if c in ended)
        return {
            "planned": self.count,
            "placed": len(calls),
            "refused": sum(1 for p in self.placed if p.refused),
            "dialled": len(per_room),
            "answered": sum(1 for leg in legs if leg["room"] in rooms and leg["sip_status"] == 200),
            "not_reached": outcomes["not_reached"],
            "not_reached_planned": self._not_reached_planned(ended),
            "dialled_twice": sum(1 for n in per_room.values() if n > 1),
            "ended": sum(outcomes.values()),
            "outcomes": dict(outcomes),
            "retried_same_call": sum(1 for p in self.placed if p.call and p.same),
        }

    def problems(self, counts: dict[str, Any]) -> list[str]:
        """What did not hold: a request refused, a retry answered another call, a room dialled
        twice, a call never ended."""
        said = [f"outbound {p.id}: {p.error}" for p in self.placed if p.error]
        said += [f"outbound {p.id}: its retry got another call" for p in self.placed if not p.same]
        if counts["dialled_twice"]:
            said.append(f"outbound: {counts['dialled_twice']} calls dialled twice")
        if counts["ended"] < counts["placed"]:
            said.append(f"outbound: {counts['placed'] - counts['ended']} calls never ended")
        return said

    def line(self, ended: Mapping[str, str | None]) -> str:
        """The table's line: ``outbound: 3/5 placed, 3 ended, 1 not reached (1 by the plan: …)``
        (:func:`not_reached`)."""
        outcomes = Counter(ended[p.call] for p in self.placed if p.call and p.call in ended)
        placed = sum(1 for p in self.placed if p.call)
        return (
            f"outbound: {placed}/{self.count} placed, {sum(outcomes.values())} ended, "
            + not_reached(outcomes["not_reached"], self._not_reached_planned(ended))
        )

    def _not_reached_planned(self, ended: Mapping[str, str | None]) -> int:
        """The calls not reached that :data:`PLAN` dialled not to be answered."""
        return sum(
            1
            for p in self.placed
            if p.call and ended.get(p.call) == "not_reached" and p.expect != "answered"
        )


def not_reached(count: int, planned: int) -> str:
    """``3 not reached (3 by the plan: busy, never answered, a failing trunk)``; the plan is
    named only when it dialled such a number."""
    if planned == 0:
        return f"{count} not reached"
    return f"{count} not reached ({planned} by the plan: busy, never answered, a failing trunk)"


def summary(counts: dict[str, Any]) -> str:
    """The report's outbound line: ``outbound: 5 placed, 5 dialled, 2 answered, …``."""
    return (
        f"outbound: {counts['placed']}/{counts['planned']} placed, {counts['refused']} refused, "
        f"{counts['dialled']} dialled, "
        f"{counts['answered']} answered, "
        f"{not_reached(counts['not_reached'], counts['not_reached_planned'])}, "
        f"{counts['dialled_twice']} dialled twice, {counts['retried_same_call']} retries "
        "answered the same call"
    )
