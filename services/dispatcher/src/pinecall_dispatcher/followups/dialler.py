"""The dialler of follow-ups: call-log's call backs taken, dialled, their tries' outcomes applied.

Every ``every_s`` (5 s) each replica ticks (:meth:`Dialler.tick`):

1. **take**: call-log's call backs requested since a little before the newest taken
   (``GET /v1/callbacks?since=``, the service key) become follow-ups, once per call back; a call
   back with no number is given up ``no_number`` (a page's contact is for a person to call);
2. **settle**: a try dialled ``settle_s`` ago with no outcome is read back from call-log (its
   ``call.ended`` went on core NATS, which may lose one);
3. **reclaim**: a try claimed and not dialled for ``stale_s`` (its replica died between the claim
   and the dial) is dialled again with the same try key, which the outbound endpoint places once;
4. **dial**: per environment with follow-ups due, the line (:class:`Line`): a fleet unheard
   (``not_ready``) defers them an hour, not burnt; a fleet with no seat free keeps them waiting
   for one; else at most its free seats are claimed (:meth:`FollowupStore.claim`: one replica
   per try; one replica at a time per environment, :meth:`FollowupStore.turn`) and dialled as outbound calls of their agent (:class:`Dial`). A dial refused for the
   line (no seat after all, the fleet unheard, the org's quota) is ``not_ready``: an hour later,
   not burnt; one refused for what will not change (the agent gone) gives the follow-up up.

A try's end comes with its call's ``call.ended`` (:meth:`Dialler.ended`). Each try and its
outcome is on the agent's log (call-log's ``POST /v1/agents/{agent}/log``): ``callback.dialled``,
``callback.answered``, ``callback.not_reached`` (with LiveKit SIP's status as the call's
``call.dialled`` entry says it, ``sip_status_code`` and ``sip_status``, and the end's reason as
``status``), ``callback.failed``, ``callback.deferred`` (the line not ready, and until when),
``callback.given_up`` (its reason).

**Each entry exactly once**: a change owes its entries in its own transaction (the outbox of
:mod:`pinecall_dispatcher.store.notes`); :meth:`Dialler.flush` sends what is owed, each with its
note's key (call-log writes an entry once per key), after every change and at every round's
start, so a replica that dies between a change and its send leaves the entry to the next round
of any replica, and one that dies between the send and its mark sends it again, written once.
The clock is injected (``clock``), so a test moves it an hour.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from pinecall_clients.calllog import CallLogClient
from pinecall_clients.errors import CallLogError, CallUnknown, LiveKitError
from pinecall_contracts.calls import AgentEntry
from pinecall_dispatcher.followups.rules import FollowupRules, TryOutcome, try_key, try_outcome
from pinecall_dispatcher.store.followups import Ended, Followup, FollowupStore
from pinecall_dispatcher.store.notes import Note, entry_key
from pinecall_servicekit.changes import Changes
from pinecall_servicekit.db import utcnow
from pinecall_servicekit.errors import PinecallError, Unprocessable

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class DialOrder:
    """One try of a follow-up, to be placed as an outbound call of its agent."""

    key: str
    """The try's id (:func:`rules.try_key`): a dial retried with it places one call."""
    environment: str
    org: str
    agent: str
    to: str
    """The callee's number (E.164)."""
    context: dict[str, Any] = field(default_factory=dict)


class Dial(Protocol):
    """Places a follow-up's try as an outbound call; answers the call's id. Raises
    ``Unprocessable`` (the agent gone, a number refused: given up), or another
    ``PinecallError``, ``CallLogError`` or ``LiveKitError`` (no seat, the fleet unheard, the
    quota, LiveKit or call-log away: the line not ready, an hour later)."""

    def __call__(self, order: DialOrder) -> Awaitable[str]: ...


@dataclass(frozen=True, slots=True)
class LineNow:
    """An environment's line for follow-ups: ``not_ready`` (nobody heard: defer an hour),
    ``full`` (no seat free: wait), or ``seats`` free."""

    state: str
    seats: int = 0


class NotDialable(Unprocessable):
    """A follow-up's number no call can be placed to (not E.164): given up."""

    code = "not_e164"


Line = Callable[[str], Awaitable[LineNow]]
"""The line of an environment now (the roster's rows and the seats promised, as admission
reads them)."""


class Dialler:
    """The follow-ups' dialler of one replica (the module docstring)."""

    def __init__(
        self,
        store: FollowupStore,
        call_log: CallLogClient,
        line: Line,
        dial: Dial,
        *,
        replica: str,
        rules: FollowupRules | None = None,
        clock: Callable[[], dt.datetime] = utcnow,
        lookback_s: float = 60.0,
        max_age_s: float = 86_400.0,
        settle_s: float = 120.0,
        stale_s: float = 60.0,
    ) -> None:
        """``lookback_s``: call backs are read again from this long before the newest taken (a
        row commits a little after its time); ``max_age_s``: a first start takes call backs no
        older; ``settle_s``: a try without its outcome this long is read back; ``stale_s``: a
        try claimed and not dialled this long is dialled again."""
        self.store, self.call_log, self.line, self.dial = store, call_log, line, dial
        self.replica = replica
        self.rules = rules or FollowupRules()
        self.clock = clock
        self.lookback_s, self.max_age_s = lookback_s, max_age_s
        self.settle_s, self.stale_s = settle_s, stale_s
        self.dialled: list[str] = []
        """Try keys this replica dialled (for tests and ``up``'s count)."""
        self.applied: list[tuple[str | None, TryOutcome]] = []
        """Each try's call and outcome, as this replica applied them (once each)."""
        self.changes = Changes()
        """Notified when a try's outcome is applied here (what a test awaits)."""
        self._flushing = asyncio.Lock()

    async def tick(self) -> None:
        """One round: what is owed to the agents' logs sent, then take, settle, reclaim, dial
        (the module docstring)."""
        await self.flush()
        await self.take()
        await self.settle()
        for f in await self.store.reclaim(self.clock(), self.stale_s, self.replica):
            await self._dial(f)
        await self.dial_due()

    async def take(self) -> int:
        """Make follow-ups of call-log's call backs not taken yet; how many were made."""
        now = self.clock()
        newest = await self.store.newest()
        oldest = now - dt.timedelta(seconds=self.max_age_s)
        since = (
            oldest
            if newest is None
            else max(oldest, newest - dt.timedelta(seconds=self.lookback_s))
        )
        made = 0
        while True:
            page = await self.call_log.callbacks(since, limit=500)
            for f in await self.store.take(page.callbacks, now):
                made += 1
                if not f.number:
                    await self._give_up(f, "no_number")
            if page.next is None or page.next <= since:
                return made
            since = page.next

    async def settle(self) -> None:
        """Read back the tries whose ``call.ended`` was not heard in ``settle_s``."""
        for f, call in await self.store.unresolved(self.clock(), self.settle_s):
            try:
                record = await self.call_log.record(call, within_s=5.0)
            except CallUnknown:
                record = None
            except CallLogError as exc:
                _log.warning(
                    "try %s: its call %s not read: %s", try_key(f.id, f.attempt), call, exc
                )
                continue
            if record is not None and record.state == "open":
                continue
            outcome = try_outcome(record.outcome if record else None)
            status, sip = await self._sip(call) if outcome == "not_reached" else (None, {})
            await self._apply(f, call, outcome, status, sip)

    async def dial_due(self) -> None:
        """Dial the follow-ups due in every environment whose line has a seat free."""
        for environment in await self.store.due_environments(self.clock()):
            async with self.store.turn(environment) as mine:
                if mine:  # else another replica dials into its seats now
                    await self._dial_environment(environment)

    async def _dial_environment(self, environment: str) -> None:
        line = await self.line(environment)
        if line.state == "not_ready":
            until = self.clock() + dt.timedelta(seconds=self.rules.not_ready_s)

            def deferred(f: Followup) -> Note:
                return _note(f, "callback.deferred", reason="not_ready", until=until.isoformat())

            await self.store.defer(environment, self.clock(), until, deferred)
            await self.flush()
            return
        for f in await self.store.claim(environment, self.clock(), line.seats, self.replica):
            await self._dial(f)

    async def ended(self, call: str, outcome: str | None, status: str | None = None) -> None:
        """``call.ended`` of ``call``: when it is a try's, its outcome applied (once); a try
        not reached carries its leg's SIP status, read from the call's log."""
        tried = try_outcome(outcome)
        sip: dict[str, Any] = {}
        if tried == "not_reached" and await self.store.tried(call):
            said, sip = await self._sip(call)
            status = status or said
        await self._apply(None, call, tried, status, sip)

    async def _sip(self, call: str) -> tuple[str | None, dict[str, Any]]:
        """The SIP status of ``call``'s leg as its log says it: the end's reason (``SIP 486
        Busy Here``), and ``call.dialled``'s ``sip_status_code`` and ``sip_status`` (none when
        the log does not answer in 5 s: logged, the outcome is applied without them)."""
        try:
            log = await self.call_log.entries(call, within_s=5.0)
        except CallLogError as exc:
            _log.warning("call %s: its SIP status not read: %s", call, exc)
            return None, {}
        reason = next((e.data.get("reason") for e in log.entries if e.kind == "call.ended"), None)
        dialled = next((e.data for e in log.entries if e.kind == "call.dialled"), {})
        sip: dict[str, Any] = {k: dialled.get(k) for k in SIP_KEYS if k in dialled}
        return (str(reason)[:64] if reason else None), sip

    async def _apply(
        self,
        f: Followup | None,
        call: str | None,
        outcome: TryOutcome,
        status: str | None,
        sip: dict[str, Any] | None = None,
    ) -> None:
        """The try ``f`` (or the one that dialled ``call``) ended ``outcome``: applied once, its
        entries owed in the same change and sent."""
        now = self.clock()
        ended = await self.store.ended(
            f, call, outcome, status, now, self.rules, lambda e: _ended_notes(e, now, sip or {})
        )
        if ended is None:
            return
        self.applied.append((ended.call, ended.outcome))
        await self.changes.notify()
        await self.flush()

    async def flush(self) -> None:
        """Send the entries owed to the agents' logs, oldest first, each marked written after
        call-log's answer; stops at the first that call-log does not take (the next round sends
        it again)."""
        async with self._flushing:  # one sender per replica: the next finds them written
            for note in await self.store.notes.owed():
                entry = AgentEntry(kind=note.kind, data=note.data, key=entry_key(note))
                try:
                    await self.call_log.agent_entry(note.agent, entry, environment=note.environment)
                except (CallLogError, TimeoutError) as exc:
                    _log.warning("%s on %s's log not written yet: %s", note.kind, note.agent, exc)
                    return
                await self.store.notes.written(note, self.clock())

    async def _dial(self, f: Followup) -> None:
        try_id = try_key(f.id, f.attempt)
        order = DialOrder(
            key=try_id,
            environment=f.environment,
            org=f.org,
            agent=f.agent,
            to=f.number or "",
            context={
                "followup": f.id,
                "try": f.attempt,
                "callback": f.callback_seq,
                "reason": f.reason,
            },
        )
        try:
            call = await self.dial(order)
        except Unprocessable as exc:
            _log.warning("try %s given up: %s", try_id, exc)
            await self._give_up(f, exc.code)
            return
        except (PinecallError, CallLogError, LiveKitError) as exc:
            _log.info("try %s: the line is not ready: %s", try_id, exc)
            code = exc.code if isinstance(exc, PinecallError) else type(exc).__name__
            await self._apply(f, None, "not_ready", code)
            return
        note = _note(f, "callback.dialled", call=call, number=f.number, key=try_id)
        await self.store.dialled(f, call, self.clock(), note)
        self.dialled.append(try_id)
        await self.flush()

    async def _give_up(self, f: Followup, reason: str) -> None:
        note = _note(f, "callback.given_up", reason=reason)
        if await self.store.give_up(f, reason, self.clock(), note):
            await self.flush()


def _note(f: Followup, kind: str, **data: Any) -> Note:
    """``kind`` owed to the follow-up's agent's log, naming its call back and try (``data``'s
    values that are None left out)."""
    said = {"callback": f.callback_seq, "try": f.attempt or None} | data
    return Note(f.environment, f.agent, kind, {k: v for k, v in said.items() if v is not None})


def _ended_notes(ended: Ended, now: dt.datetime, sip: dict[str, Any]) -> list[Note]:
    """What a try's outcome owes the agent's log: ``callback.deferred`` (the line not ready),
    or the outcome's entry (a try not reached with its ``sip``) and, after the last try,
    ``callback.given_up``."""
    f, outcome = ended.followup, ended.outcome
    if outcome == "not_ready":
        until = now + dt.timedelta(seconds=ended.next.due_in_s)
        return [_note(f, "callback.deferred", reason=ended.status, until=until.isoformat())]
    said = _note(f, _KINDS[outcome], call=ended.call, status=ended.status)
    if outcome == "not_reached":
        said = Note(said.environment, said.agent, said.kind, said.data | sip)
    notes = [said]
    if ended.next.given_up is not None:
        given_up = _note(f, "callback.given_up", reason=ended.next.given_up, tries=ended.next.burnt)
        notes.append(given_up)
    return notes


SIP_KEYS = ("sip_status_code", "sip_status")
"""What a try not reached carries of its call's ``call.dialled`` entry (LiveKit SIP's status)."""

_KINDS: dict[TryOutcome, str] = {
    "answered": "callback.answered",
    "not_reached": "callback.not_reached",
    "failed": "callback.failed",
    "not_ready": "callback.deferred",
}
