"""Simulated callers at a rate: phones through LiveKit SIP and web visitors through the token
endpoint, in every environment, each speaking the recorded lines for a turn or two, then hanging
up (issue 8, "The whole platform on one machine"). ``pinecall-runtime lab callers`` runs it.

Caller ``i`` rings the environment ``environments[i % len(environments)]``, as a phone or a
visitor in turn (``kinds[(i // len(environments)) % len(kinds)]``), and speaks one turn or two (every other round of
callers speaks two). Its arrivals are paced ``1 / rate`` seconds apart from the start, never
bunched to catch up. Each caller:

- a phone: its room is made with one dispatch to the fleet's plain name carrying a
  :class:`~pinecall_contracts.dispatch.CallRing` (``sip_call``), and it joins as LiveKit SIP's
  participant with its own number; a visitor: a token from ``POST /v1/tokens`` with the
  environment's app key, then it joins the room the token names (``web_call``). A visitor
  refused ``fleet_full`` does what the page does: asks a call back (``POST /v1/callbacks``);
- rings (silent frames) until an agent joins, at most ``answer_within_s``; when the agent speaks
  first (``greeted``: its greeting), hears it out; says the greeting, waits for the agent's
  voice, listens a moment; a second turn asks the question the same way;
  then hangs up with a goodbye. Answered by the overflow, it hears the sentence out instead: the
  overflow deletes the room after it, which ends the call (``ended_by: far_end``).

Every change of a caller's state is a :class:`~pinecall_contracts.lab.CallerReport` line written
to ``out`` at once (the reader keeps the last line of each caller). Stopping (SIGTERM) places no
new caller and hangs up every caller still in its call with a goodbye.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import secrets
from pathlib import Path
from typing import IO

import httpx
import msgspec
from livekit import api

from pinecall_contracts.base import encode
from pinecall_contracts.calls import CallbackRequest
from pinecall_contracts.dispatch import CallRing, TokenRequest
from pinecall_contracts.ids import is_overflow
from pinecall_contracts.lab import CallerKind, CallerReport
from pinecall_labroom import LabRoom
from pinecall_loadlab.callers.script import (
    CallerLog,
    Change,
    HangUp,
    Pause,
    Say,
    Step,
    WaitForAgent,
    WaitForAnswer,
    play,
)
from pinecall_loadlab.livekit.callers import Refused, sip_call, web_call

_log = logging.getLogger(__name__)


class Environment(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One environment the callers ring: its fleet, its LiveKit, and the keys a SIP trunk and a
    web page of it hold."""

    environment: str
    fleet: str
    """The fleet's plain name: the ring's dispatch."""
    livekit_url: str
    api_key: str
    api_secret: str
    """LiveKit's API key and secret (what LiveKit SIP creates a caller's room with)."""
    app_key: str
    """The environment's app key: a visitor's token and a refused visitor's call back."""


class TrafficPlan(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Who rings, where, how often and how many (a JSON file for ``lab callers --plan``)."""

    environments: list[Environment]
    dispatcher_url: str
    """The token endpoint's service (``POST /v1/tokens``)."""
    call_log_url: str
    """Where a refused visitor's page asks a call back (``POST /v1/callbacks``)."""
    rate: float = 1.0
    """Callers a second."""
    calls: int | None = None
    """Callers in all; None: until stopped."""
    kinds: tuple[CallerKind, ...] = ("sip", "web")
    agent: str = "support-bot"
    org: str = "org_lab"
    answer_within_s: float = 60.0
    """How long a caller rings before it gives up (a caller nobody answers is silent)."""
    speak_within_s: float = 30.0
    """How long a caller waits for the agent's voice after one of its lines before it gives up."""
    listen_s: float = 1.0
    """How long a caller listens to the agent's answer before it speaks again or hangs up."""
    greeted: bool = False
    """The agent speaks first (its definition has a greeting): each caller hears it out (until
    the agent is quiet :data:`GREETING_QUIET_S`) before its first line, so its lines are turns
    of their own (said over the greeting, a line's wait would end at the greeting's tail)."""
    run: str = ""
    """Names the rooms (``<run>-<i>-<kind>``); random when empty."""


GREETING_QUIET_S = 0.5
"""A greeted caller speaks once the agent has been quiet this long."""


def script(turns: int, plan: TrafficPlan) -> list[Step]:
    """What a caller says once an agent answered: the agent's greeting heard out when it greets
    (``greeted``), then ``turns`` turns (the greeting, then the question), each waiting for the
    agent's voice and listening ``listen_s``, then hang up."""
    steps: list[Step] = []
    if plan.greeted:
        steps.append(WaitForAgent(timeout_s=plan.speak_within_s, until_quiet_s=GREETING_QUIET_S))
    for line in ("greeting", "question")[:turns]:
        steps += [
            Say(line=line),
            WaitForAgent(timeout_s=plan.speak_within_s),
            Pause(seconds=plan.listen_s),
        ]
    return [*steps, HangUp()]


def hearing_out(plan: TrafficPlan) -> list[Step]:
    """What a caller does when the overflow answers: hears its sentence out (the overflow then
    deletes the room, which ends the script), hanging up only after 2 s of quiet."""
    return [WaitForAgent(timeout_s=plan.speak_within_s, until_quiet_s=2.0), HangUp()]


class Traffic:
    """Places ``plan``'s callers, writing each change of each caller to ``out``."""

    def __init__(self, plan: TrafficPlan, out: IO[bytes]) -> None:
        self.plan, self.out = plan, out
        self.run = plan.run or f"lab{secrets.token_hex(3)}"
        self.reports: dict[int, CallerReport] = {}
        """The newest report of each caller."""

    def say(self, report: CallerReport) -> None:
        self.reports[report.caller] = report
        self.out.write(encode(report) + b"\n")
        self.out.flush()

    async def run_until(self, stop: asyncio.Event) -> None:
        """Place callers until ``plan.calls`` were placed and ended, or ``stop`` is set (then
        every caller still in its call hangs up); returns once every caller ended."""
        loop = asyncio.get_running_loop()
        start = loop.time()
        callers: set[asyncio.Task[None]] = set()
        async with contextlib.AsyncExitStack() as stack:
            http = await stack.enter_async_context(httpx.AsyncClient(timeout=10))
            lkapis = []
            for env in self.plan.environments:
                lk = api.LiveKitAPI(env.livekit_url, env.api_key, env.api_secret)
                stack.push_async_callback(lk.aclose)
                lkapis.append(lk)
            i = 0
            try:
                while self.plan.calls is None or i < self.plan.calls:
                    with contextlib.suppress(TimeoutError):
                        # the schedule: caller i at start + i / rate (a cadence, not an event)
                        async with asyncio.timeout_at(start + i / self.plan.rate):
                            await stop.wait()
                    if stop.is_set():
                        break
                    n = len(self.plan.environments)
                    task = asyncio.create_task(self.caller(i, lkapis[i % n], http))
                    callers.add(task)
                    task.add_done_callback(callers.discard)
                    i += 1
                waiting = asyncio.ensure_future(stop.wait())
                try:
                    while callers and not stop.is_set():
                        await asyncio.wait({*callers, waiting}, return_when="FIRST_COMPLETED")
                finally:
                    waiting.cancel()
            finally:
                for task in list(callers):
                    task.cancel()  # each hangs up with a goodbye (``caller``'s finally)
                await asyncio.gather(*callers, return_exceptions=True)

    async def caller(self, i: int, lk: api.LiveKitAPI, http: httpx.AsyncClient) -> None:
        """Caller ``i``: ring, speak, hang up; its reports said as it goes. Never raises but
        ``CancelledError`` (after hanging up)."""
        plan, n = self.plan, len(self.plan.environments)
        env = plan.environments[i % n]
        kind = plan.kinds[(i // n) % len(plan.kinds)]
        turns = 1 + (i // (n * len(plan.kinds))) % 2
        room_name = f"{self.run}-{i}-{kind}"
        number = f"+1555{i:07d}" if kind == "sip" else None
        report = CallerReport(
            caller=i, kind=kind, environment=env.environment, state="ringing", number=number
        )
        room: LabRoom | None = None
        try:
            if kind == "sip":
                ring = CallRing(agent=plan.agent, org=plan.org, caller="sip")
                room = await sip_call(
                    lk, env.livekit_url, env.api_key, env.api_secret,
                    room=room_name, fleet=env.fleet, phone=number or "",
                    metadata=encode(ring).decode(),
                )  # fmt: skip
            else:
                asked = TokenRequest(agent=plan.agent, org=plan.org, identity=f"visitor-{i}")
                token, room = await web_call(http, plan.dispatcher_url, env.app_key, asked)
                report = msgspec.structs.replace(report, call=token.call)
        except Refused as exc:
            called_back = exc.code == "fleet_full" and await self._call_back(http, env, i)
            self.say(
                msgspec.structs.replace(
                    report, state="refused", refused=exc.code, callback=called_back
                )
            )
            return
        except (httpx.HTTPError, OSError, api.TwirpError) as exc:
            self.say(msgspec.structs.replace(report, state="failed", error=repr(exc)[:300]))
            return
        await self._talk(report, room, turns)

    async def _talk(self, report: CallerReport, room: LabRoom, turns: int) -> None:
        loop = asyncio.get_running_loop()
        arrived, arrived_at = loop.time(), dt.datetime.now(dt.UTC)
        log = CallerLog()

        def now(state: str, **changes: object) -> CallerReport:
            heard = log.agent_heard[0] - arrived if log.agent_heard else None
            return msgspec.structs.replace(
                report,
                state=state,
                room=room.room,
                arrived_at=arrived_at,
                answered_by=log.answered_by,
                answered_s=None if log.answered is None else round(log.answered - arrived, 3),
                first_heard_s=None if heard is None else round(heard, 3),
                waits_s=[round(w, 3) for w in log.waits()],
                said=[line for line, _start, _end in log.said],
                **changes,
            )

        def on_change(change: Change) -> None:
            self.say(now(change))

        self.say(now("ringing"))
        error: str | None = None
        stopped = False
        try:
            ringing = [WaitForAnswer(timeout_s=self.plan.answer_within_s)]
            await play(room, ringing, log=log, on_change=on_change)
            overflow = is_overflow(log.answered_by or "")
            then = hearing_out(self.plan) if overflow else script(turns, self.plan)
            await play(room, then, log=log, on_change=on_change)
        except TimeoutError:
            error = "nobody answered" if log.answered is None else "the agent never spoke"
        except asyncio.CancelledError:
            stopped, error = True, "stopped"
        if log.hung_up is None and log.closed is None:
            await room.leave()  # a goodbye, stopped or not: the call ends as a hang-up
        ended_by = "far_end" if log.closed is not None else "caller"
        self.say(now("ended", ended_at=dt.datetime.now(dt.UTC), ended_by=ended_by, error=error))
        _log.info(
            "caller %d (%s, %s): answered by %s, first heard %s s, ended by %s%s",
            report.caller, report.kind, report.environment, log.answered_by,
            self.reports[report.caller].first_heard_s, ended_by,
            f" ({error})" if error else "",
        )  # fmt: skip
        if stopped:
            raise asyncio.CancelledError

    async def _call_back(self, http: httpx.AsyncClient, env: Environment, i: int) -> bool:
        """What a page does for a visitor refused ``fleet_full``: ask a call back."""
        asked = CallbackRequest(
            agent=self.plan.agent, contact=f"visitor-{i}@example.com", reason="fleet full"
        )
        try:
            r = await http.post(
                f"{self.plan.call_log_url}/v1/callbacks",
                content=encode(asked),
                headers={"authorization": f"Bearer {env.app_key}"},
            )
        except httpx.HTTPError as exc:
            _log.warning("visitor %d: the call back was not asked: %r", i, exc)
            return False
        return r.status_code == httpx.codes.OK


def load_plan(path: Path, **overrides: object) -> TrafficPlan:
    """The plan in JSON file ``path``, with ``overrides`` (None values ignored); raises
    ``msgspec.ValidationError`` or ``DecodeError`` for a file that is not a plan."""
    plan = msgspec.json.decode(path.read_bytes(), type=TrafficPlan)
    given = {k: v for k, v in overrides.items() if v is not None}
    return msgspec.convert(msgspec.to_builtins(plan) | given, TrafficPlan) if given else plan
