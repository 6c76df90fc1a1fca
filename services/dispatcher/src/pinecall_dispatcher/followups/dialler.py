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
``callback.answered``, ``callback.not_reached`` (with LiveKit SIP's status), ``callback.failed``,
``callback.deferred`` (the line not ready, and until when), ``callback.given_up`` (its reason).
The clock is injected (``clock``), so a test moves it an hour.
"""

from __future__ import annotations

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

    async def tick(self) -> None:
        """One round: take, settle, reclaim, dial (the module docstring)."""
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
            await self._ended(
                await self.store.ended(f, call, outcome, None, self.clock(), self.rules)
            )

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
            for f in await self.store.defer(environment, self.clock(), until):
                await self._note(
                    f, "callback.deferred", reason="not_ready", until=until.isoformat()
                )
            return
        for f in await self.store.claim(environment, self.clock(), line.seats, self.replica):
            await self._dial(f)

    async def ended(self, call: str, outcome: str | None, status: str | None = None) -> None:
        """``call.ended`` of ``call``: when it is a try's, its outcome applied (once)."""
        ended = await self.store.ended(
            None, call, try_outcome(outcome), status, self.clock(), self.rules
        )
        await self._ended(ended)

    async def _dial(self, f: Followup) -> None:
        key = try_key(f.id, f.attempt)
        order = DialOrder(
            key=key,
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
            _log.warning("try %s given up: %s", key, exc)
            await self._give_up(f, exc.code)
            return
        except (PinecallError, CallLogError, LiveKitError) as exc:
            _log.info("try %s: the line is not ready: %s", key, exc)
            code = exc.code if isinstance(exc, PinecallError) else type(exc).__name__
            ended = await self.store.ended(f, None, "not_ready", code, self.clock(), self.rules)
            await self._ended(ended)
            return
        await self.store.dialled(f, call, self.clock())
        self.dialled.append(key)
        await self._note(f, "callback.dialled", call=call, number=f.number, key=key)

    async def _ended(self, ended: Ended | None) -> None:
        if ended is None:
            return
        f, outcome = ended.followup, ended.outcome
        if outcome == "not_ready":
            until = self.clock() + dt.timedelta(seconds=ended.next.due_in_s)
            await self._note(f, "callback.deferred", reason=ended.status, until=until.isoformat())
            return
        await self._note(f, _KINDS[outcome], call=ended.call, status=ended.status)
        if ended.next.given_up is not None:
            await self._note(
                f, "callback.given_up", reason=ended.next.given_up, tries=ended.next.burnt
            )

    async def _give_up(self, f: Followup, reason: str) -> None:
        if await self.store.give_up(f, reason, self.clock()):
            await self._note(f, "callback.given_up", reason=reason)

    async def _note(self, f: Followup, kind: str, **data: Any) -> None:
        """``kind`` on the follow-up's agent's log, naming its call back and try."""
        said = {"callback": f.callback_seq, "try": f.attempt or None} | data
        entry = AgentEntry(kind=kind, data={k: v for k, v in said.items() if v is not None})
        try:
            await self.call_log.agent_entry(f.agent, entry, environment=f.environment)
        except (CallLogError, TimeoutError) as exc:
            _log.warning("%s of follow-up %d not on %s's log: %s", kind, f.id, f.agent, exc)


_KINDS: dict[TryOutcome, str] = {
    "answered": "callback.answered",
    "not_reached": "callback.not_reached",
    "failed": "callback.failed",
    "not_ready": "callback.deferred",
}
