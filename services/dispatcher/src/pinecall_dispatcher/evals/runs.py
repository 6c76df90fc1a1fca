"""``POST /v1/evals/voice``: ring an agent with the runtime's own caller and say what it heard.

In order, each refusal a problem detail with nothing made:

1. a script with no lines: 400 (the body's schema: ``script`` is a list of at least 1), and 422
   ``empty_script`` for a VoiceEval built in code without it;
2. no voice or ears configured (a vendor plugin refusing its settings): 503 ``evals_unavailable``;
3. admission, as a web visitor's token is admitted (:meth:`Admission.admit
   <pinecall_dispatcher.admission.Admission.admit>`, ``caller: simulated``): an agent its org
   does not define in the environment (another org's, another environment's) is 422
   ``unknown_agent``; then ``not_ready``, ``fleet_full`` (503) and the org's quota (429), each
   counted and said as the token endpoint says them. The call counts against the org's quota as
   any call does.

Then the caller joins the room its token names, which makes the room with the ring (the pending
dispatch to the fleet's plain name carrying a ``CallRing`` of ``caller: simulated``): the
dispatcher places it as every ring, offered to a worker of the fleet, re-offered, sent to the
overflow (seed 000, "Who takes a call": "a simulated caller ... offered the same way, by the
endpoint that makes them"). It joins over the lab transport under the stand-in
(``PINECALL_LAB_ROOMS``, as the worker's job does), else over LiveKit's WebRTC (:mod:`.rtc`).

**The request waits for the result.** A script is at most ``MAX_LINES`` lines, so a call is
bounded: ringing (``eval_answer_within_s``), then per line its speech and the agent's answer
(``eval_speak_within_s`` to start, then until it is quiet): about two minutes at the most with
the defaults, which :meth:`VoiceEvals.ceiling_s` says; past it the caller hangs up and the result
says how far it came. A 202 and a GET would need the result kept, which the agent's log already
does: a client that cannot wait reads the ``eval.voice`` entry there. A client that goes away
mid-call cancels the request: the caller hangs up with it.

The result is written on the agent's log (``eval.voice``, the :class:`VoiceEvalResult`), through
call-log with the service key, where the ``fleet.full`` of the same agent goes: not on the call's
own log, which its worker seals when the caller leaves (``call.sealed``: nothing more is
written), before the caller's result is whole. The entry names the call, whose log holds the
agent's side (``turn.user``, ``turn.agent`` with its own measure of first audio).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import secrets
from typing import Any

import aiohttp
import msgspec
from nats.aio.subscription import Subscription

from pinecall_clients.calllog import CallLogClient
from pinecall_clients.errors import CallLogError
from pinecall_contracts.calls import AgentEntry, CallEvent
from pinecall_contracts.dispatch import TokenRequest, VisitorToken
from pinecall_contracts.evals import EVAL_VOICE, MAX_LINES, VoiceEval, VoiceEvalResult
from pinecall_dispatcher.admission import Admission
from pinecall_dispatcher.evals import rtc
from pinecall_dispatcher.evals.caller import Caller, Room, Timing
from pinecall_dispatcher.evals.voices import ears, spoken, voice
from pinecall_dispatcher.settings import DispatcherSettings
from pinecall_servicekit.bus import Bus
from pinecall_servicekit.errors import Unavailable, Unprocessable

_log = logging.getLogger(__name__)
ON_THE_LOG_WITHIN_S = 5.0
"""How long the result's entry on the agent's log may hold the answer (retried meanwhile)."""
LINE_S = 8.0
"""What :meth:`VoiceEvals.ceiling_s` allows a line and its answer beyond the agent's first
audio (a line of 300 characters is about 20 s of speech: a rare script takes that long)."""


class EmptyScript(Unprocessable):
    code = "empty_script"


class NoRoom(Unavailable):
    code = "evals_unavailable"


class VoiceEvals:
    """The simulated callers of one dispatcher replica; :meth:`aclose` hangs up those still in
    a call."""

    def __init__(
        self,
        settings: DispatcherSettings,
        admission: Admission,
        bus: Bus,
        call_log: CallLogClient,
    ) -> None:
        self.settings, self.admission, self.bus, self.call_log = settings, admission, bus, call_log
        self.timing = Timing(
            answer_within_s=settings.eval_answer_within_s,
            speak_within_s=settings.eval_speak_within_s,
            quiet_s=settings.eval_quiet_s,
        )
        self._ending: dict[str, tuple[asyncio.Event, list[str]]] = {}
        """Per call in progress: set on its ``call.ended``, and the outcome said."""
        self._subscription: Subscription | None = None
        self._http: aiohttp.ClientSession | None = None

    def ceiling_s(self, lines: int = MAX_LINES) -> float:
        """The longest a script of ``lines`` lines keeps the request, in seconds."""
        t = self.timing
        return t.answer_within_s + (lines + 1) * (t.speak_within_s + t.quiet_s + LINE_S)

    async def run(self, request: VoiceEval, environment: str) -> VoiceEvalResult:
        """Ring ``request.agent`` in ``environment`` and say the script; the result, also on the
        agent's log. Refusals as the module docstring says."""
        if not request.script:
            raise EmptyScript(
                "a script says at least one line",
                errors=[{"message": "no lines", "key": "script", "source": "body"}],
            )
        http = self._session()
        tts, stt = voice(self.settings, http), ears(self.settings, http)
        identity = f"eval-{secrets.token_hex(6)}"
        asked = TokenRequest(agent=request.agent, org=request.org, identity=identity)
        token = await self.admission.admit(asked, environment, caller="simulated")
        started = dt.datetime.now(dt.UTC)
        greets = await self._greets(request, environment)
        await self._follow()
        stop, said = self._ending.setdefault(token.call, (asyncio.Event(), []))
        try:
            room = await self._join(token)
            caller = Caller(room, stt.stream(), stop, self.timing)
            try:
                async with asyncio.timeout(self.ceiling_s(len(request.script))):
                    outcome = await caller.run(
                        list(request.script), lambda line: spoken(tts, line), greets=greets
                    )
            except TimeoutError:
                outcome = "silent"
            finally:
                await caller.hang_up()
        finally:
            self._ending.pop(token.call, None)
        result = VoiceEvalResult(
            call=token.call,
            room=token.room,
            agent=request.agent,
            org=request.org,
            environment=environment,
            outcome=outcome,
            turns=caller.turns,
            answered_by=caller.answered_by,
            call_outcome=said[0] if said else None,
            started_at=started,
            ended_at=dt.datetime.now(dt.UTC),
        )
        await self._on_the_log(result)
        return result

    async def aclose(self) -> None:
        for stop, _ in self._ending.values():
            stop.set()
        if self._subscription is not None:
            await self._subscription.unsubscribe()
            self._subscription = None
        if self._http is not None:
            await self._http.close()
            self._http = None

    def _session(self) -> aiohttp.ClientSession:
        if self._http is None:
            self._http = aiohttp.ClientSession()
        return self._http

    async def _join(self, token: VisitorToken) -> Room:
        if self.settings.lab_rooms:
            from pinecall_labroom import JoinError, LabRoom

            try:
                return await LabRoom.connect(token.url, token.token, session=self._session())
            except (JoinError, aiohttp.ClientError) as exc:
                raise NoRoom(f"the simulated caller could not join {token.room}: {exc}") from None
        return await rtc.join(token.url, token.token)

    async def _greets(self, request: VoiceEval, environment: str) -> bool:
        """Whether the agent speaks first (its definition's greeting): the caller then hears it
        out before its first line. Not read (call-log away): taken as not."""
        try:
            version = await self.call_log.agent(
                request.agent, org=request.org, environment=environment, within_s=2.0
            )
        except (CallLogError, msgspec.MsgspecError) as exc:
            _log.warning(
                "eval of %s: its greeting not read (%s): none heard out", request.agent, exc
            )
            return False
        return bool(version.definition.greeting)

    async def _follow(self) -> None:
        """Hear every ``call.ended`` (not as the queue group: each replica hears it, since any
        replica may hold the caller)."""
        if self._subscription is None:
            subject = self.bus.subjects.call_events("ended")
            self._subscription = await self.bus.subscribe(subject, CallEvent, self._ended)

    async def _ended(self, event: CallEvent) -> None:
        ending = self._ending.get(event.call)
        if ending is not None:
            ending[1].append(event.outcome or "ended")
            ending[0].set()

    async def _on_the_log(self, result: VoiceEvalResult) -> None:
        data: dict[str, Any] = msgspec.to_builtins(result)
        entry = AgentEntry(kind=EVAL_VOICE, data=data)
        try:
            async with asyncio.timeout(ON_THE_LOG_WITHIN_S):
                await self.call_log.agent_entry(
                    result.agent,
                    entry,
                    environment=result.environment,
                    within_s=ON_THE_LOG_WITHIN_S,
                )
        except (TimeoutError, CallLogError) as exc:
            _log.warning("eval %s: its result not written on the agent's log: %s", result.call, exc)
