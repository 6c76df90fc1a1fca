"""The reap: every minute, the unsealed calls and the rooms of each LiveKit, judged and closed.

A reap goes LiveKit by LiveKit, with the calls of every environment on it (two environments
sharing one LiveKit share its rooms, so neither may take down a room the other's call holds):

1. the unsealed calls of those environments, from call-log (read *before* the rooms: a call
   opened after this read has a room too young to look unclaimed);
2. the rooms, from ListRooms; if LiveKit does not answer, nothing of it is judged this reap (a
   room missing from no answer is not a room gone);
3. a written call (chat, WhatsApp: it has a channel and no room) quiet as long as its endpoint
   waits is ended ``timeout`` and sealed (:func:`pinecall_reaper.domain.judge_written`);
   each voice call worth a look (over the ceiling, or quiet) gets its room's agents read and its
   verdict (:func:`pinecall_reaper.domain.judge`): end it (unless ended), take its room down,
   seal it — the order the sentence job keeps;
   a voice call's recording a dead job left unfinished (``call.recording_started`` and nothing
   after it) is kept before the seal, and its entry written (:func:`pinecall_jobs.kept.
   keep_unfinished`: the parts completed, or the upload aborted; issue 19, acceptance 2);
4. each room no unsealed call names, older than ``quiet_s`` and with no agent, is taken down.

Two replicas reaping at once do not fight: every step is idempotent where the owner decides
(call-log ends a call once under its head row's lock, a second end changes nothing, a seal of a
sealed call changes nothing, an end of one is a 409 taken as done; DeleteRoom of a room gone is
``not_found``, taken as done), and both reach the same verdicts from the same state up to the
difference of their clocks. Nothing is leased or locked here, so a replica that dies mid-reap
leaves nothing held. What a race can do: a replica may end ``drained`` a call the other ended
``timeout`` a moment before; the first outcome stays.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from pinecall_clients.bucket import BucketAccess
from pinecall_clients.calllog import CallLogClient
from pinecall_clients.errors import CallLogError, LiveKitError
from pinecall_clients.livekit import LiveKitAccess
from pinecall_contracts import entries
from pinecall_jobs.kept import keep_unfinished
from pinecall_reaper import calls, domain
from pinecall_reaper.livekit import Rooms

_log = logging.getLogger(__name__)

REASONS: dict[domain.Why, str] = {
    "ceiling": "the reaper: older than MAX_CALL_SECONDS",
    "no_agent": "the reaper: no agent in its room, quiet",
    "room_gone": "the reaper: its room is gone, quiet",
    "written_quiet": "the reaper: a written call quiet as long as its endpoint waits",
}


@dataclass
class Reaped:
    """What one reap did."""

    reaped: list[domain.Verdict] = field(default_factory=list)
    rooms: list[str] = field(default_factory=list)
    """Rooms no unsealed call named, taken down."""
    failed: list[str] = field(default_factory=list)
    """What could not be read or done (it is tried again next reap)."""


LiveKits = Callable[[], Awaitable[Mapping[str, LiveKitAccess]]]
"""Each environment's LiveKit now (:meth:`pinecall_reaper.fleets.Fleets.livekits`)."""


class Reaper:
    """Reaps the calls of the environments ``livekits`` names; :meth:`run` every ``every_s``."""

    def __init__(
        self,
        log: CallLogClient,
        livekits: LiveKits,
        rules: domain.Rules,
        *,
        every_s: float = 60.0,
        recordings: BucketAccess | None = None,
    ) -> None:
        self.log = log
        self.recordings = recordings
        """The recordings' bucket: None, a dead job's upload is left to the bucket's rules."""
        self.livekits = livekits
        self.rules = rules
        self.every_s = every_s
        self._rooms: dict[LiveKitAccess, Rooms] = {}
        self.reaps = 0
        self.last: Reaped | None = None
        self.reaped_once = asyncio.Event()
        """Set after every reap (a test or a probe awaits it; it is never cleared here)."""
        self.totals: dict[str, int] = {}
        """Counts since start: ``reaped_<why>``, ``rooms``, ``failed``, ``recording_kept``,
        ``recording_failed`` (a dead job's recording kept, or said failed)."""

    async def aclose(self) -> None:
        for rooms in self._rooms.values():
            await rooms.aclose()

    async def run(self) -> None:
        """Reap now and every ``every_s`` seconds until cancelled; a reap's failures are
        logged and counted, never the end of the loop."""
        while True:
            try:
                await self.reap()
            except Exception:
                _log.exception("a reap failed")
            await asyncio.sleep(self.every_s)

    async def reap(self, now: dt.datetime | None = None) -> Reaped:
        """One reap of every LiveKit, judged at ``now`` (default: the clock at its start)."""
        now = now or dt.datetime.now(dt.UTC)
        done = Reaped()
        on: dict[LiveKitAccess, list[str]] = {}
        for environment, lk in sorted((await self.livekits()).items()):
            on.setdefault(lk, []).append(environment)
        for lk, environments in on.items():
            rooms = self._rooms.get(lk) or self._rooms.setdefault(lk, Rooms(lk))
            await self._reap_on(rooms, environments, now, done)
        self.reaps += 1
        self.last = done
        self.reaped_once.set()
        for verdict in done.reaped:
            self._count(f"reaped_{verdict.why}")
        self._count("rooms", len(done.rooms))
        self._count("failed", len(done.failed))
        if done.reaped or done.rooms or done.failed:
            _log.info(
                "reaped: %d calls reaped, %d rooms taken down, %d failed",
                len(done.reaped),
                len(done.rooms),
                len(done.failed),
            )
        return done

    def _count(self, what: str, n: int = 1) -> None:
        self.totals[what] = self.totals.get(what, 0) + n

    async def _reap_on(
        self, rooms: Rooms, environments: list[str], now: dt.datetime, done: Reaped
    ) -> None:
        try:
            seen = [c for env in environments for c in await calls.unsealed(self.log, env)]
        except CallLogError as exc:
            done.failed.append(f"listing calls of {', '.join(environments)}: {exc}")
            return
        try:
            listed = await rooms.listed()
        except LiveKitError as exc:
            done.failed.append(str(exc))
            return
        for call in seen:
            if call.channel is not None:  # a written call: no room to read
                try:
                    if (written := domain.judge_written(call, now, self.rules)) is not None:
                        await self._carry_out(rooms, written)
                        done.reaped.append(written)
                except CallLogError as exc:
                    done.failed.append(f"call {call.call}: {exc}")
                continue
            if not domain.worth_a_look(call, now, self.rules):
                continue
            try:
                room = listed.get(call.room)
                agents = await rooms.agents(call.room) if room is not None else None
                if agents is None:  # gone, or gone since ListRooms
                    room = None
                verdict = domain.judge(call, room, agents or 0, now, self.rules)
                if verdict is not None:
                    await self._carry_out(rooms, verdict)
                    done.reaped.append(verdict)
            except (CallLogError, LiveKitError) as exc:
                done.failed.append(f"call {call.call}: {exc}")
        claimed = {c.room for c in seen}
        for room in domain.unclaimed(listed.values(), claimed, now, self.rules):
            try:
                if room.participants and await rooms.agents(room.name):
                    continue
                if await rooms.delete(room.name):
                    done.rooms.append(room.name)
                    _log.info("room %s taken down: no call names it, no agent in it", room.name)
            except LiveKitError as exc:
                done.failed.append(f"room {room.name}: {exc}")

    async def _carry_out(self, rooms: Rooms, verdict: domain.Verdict) -> None:
        """End (unless ended), keep a dead job's recording, take the room down, seal: each step
        idempotent."""
        if verdict.outcome is not None:
            await calls.end(
                self.log, verdict.call, verdict.outcome, REASONS[verdict.why], verdict.cause
            )
        if self.recordings is not None and verdict.why != "written_quiet":
            for kind, data in await keep_unfinished(self.log, verdict.call, self.recordings):
                kept = "kept" if kind == entries.CALL_RECORDING else "failed"
                self._count(f"recording_{kept}")
                _log.info("call %s: a dead job's recording %s: %s", verdict.call, kept, data)
        if verdict.take_room:
            await rooms.delete(verdict.room)
        await self.log.seal(verdict.call)
        _log.info("call %s reaped (%s): %s", verdict.call, verdict.why, verdict.outcome or "sealed")
