"""What ``up`` sees of the calls while they run, and the live table it prints.

Four sources, each the one that knows:

- the callers (``lab callers --out``: a :class:`~pinecall_contracts.lab.CallerReport` line at
  each change): ringing, who answered, when the agent was first heard, ended or refused;
- the call log's events on NATS (``call.opened``, ``call.ended``, ``call.sealed``): each room's
  call id, the worker that opened it, its outcome, and when its log is sealed;
- the dispatcher's ``GET /v1/ops/offers`` (rooms kept in offers now) and the roster's rows
  (``fleet.list`` over NATS: seats free), read through their clients with the operator key at
  each refresh of the table;
- the tools: each tool call asked and each result written, as call-log says them on NATS (once
  per id: ``calls.tool.asked``, ``calls.tool.result``), and the app processes' ledgers
  (:mod:`pinecall_runtime.up.apps`: tool calls run twice, calls handed, the kills).

A caller is *silent* when it heard no agent's voice within :data:`SILENT_S` of its arrival
(issue 8); one still ringing past it counts at once.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import time
from collections import defaultdict
from pathlib import Path

from pinecall_clients.dispatcher import DispatcherClient
from pinecall_clients.errors import DispatcherError, RosterError
from pinecall_clients.roster import RosterClient
from pinecall_contracts.base import decode
from pinecall_contracts.calls import CallEvent, ToolAsked, ToolResult
from pinecall_contracts.dispatch import OffersSnapshot
from pinecall_contracts.fleet import RosterSnapshot
from pinecall_contracts.ids import is_overflow
from pinecall_contracts.lab import CallerReport
from pinecall_runtime.loaddrive import quantile
from pinecall_runtime.up.apps import Kill, Ledgers, tally
from pinecall_runtime.up.stage import ENVIRONMENTS
from pinecall_servicekit.bus import Bus
from pinecall_servicekit.changes import Changes
from pinecall_servicekit.operator import table

WHATSAPP_ROOM = "whatsapp-"
"""How a WhatsApp thread's room begins (``<channel>-<call>``, the chat service's)."""
SILENT_S = 12.0
"""No agent's voice within this many seconds of arrival: a silent caller (issue 8)."""


def is_silent(report: CallerReport, now: dt.datetime) -> bool:
    """Whether ``report``'s caller was left without an agent's voice for :data:`SILENT_S` from
    its arrival (a caller that never joined a room is not: it was refused or never rang)."""
    if report.arrived_at is None:
        return False
    if report.first_heard_s is not None:
        return report.first_heard_s > SILENT_S
    until = report.ended_at or now
    return (until - report.arrived_at).total_seconds() > SILENT_S


def heard_waits(reports: list[CallerReport]) -> list[float]:
    """First audio as the callers heard it: each line's wait, from its end to the agent's first
    sound (seconds), over ``reports`` (the table and the report read the same)."""
    return [w for r in reports for w in r.waits_s]


def by_overflow(report: CallerReport) -> bool:
    """Whether the overflow (``<fleet>/overflow``) answered it."""
    return report.answered_by is not None and is_overflow(report.answered_by)


class Watch:
    """The calls as ``up`` knows them; :meth:`listen` to the call log, :meth:`read_callers` and
    :meth:`refresh` at each tick."""

    def __init__(
        self,
        callers_file: Path,
        roster: RosterClient,
        dispatcher: DispatcherClient,
        ledgers: Ledgers,
        consoles: set[str],
    ):
        self.callers_file = callers_file
        self.ledgers = ledgers
        self.consoles = consoles
        """The consoles' instances (handed no call)."""
        self.kills: list[Kill] = []
        """``--app-restarts``' kills so far."""
        self.tools: dict[tuple[str, str], str | None] = {}
        """(call, tool call id) of every tool call asked → its result's error (None: none, or
        no result yet; "timeout" past its deadline)."""
        self.answered: set[tuple[str, str]] = set()
        """(call, tool call id) of every tool call with a result written."""
        self.reports: dict[int, CallerReport] = {}
        self.events: dict[tuple[str, str], dict[str, CallEvent]] = defaultdict(dict)
        """(environment, room) → the call log's events of its call, by ``what``."""
        self.changes = Changes()
        """Notified at each call event (:meth:`wait_sealed` awaits it)."""
        self._read = 0
        self._roster, self._dispatcher = roster, dispatcher
        self.roster: RosterSnapshot | None = None
        self.offers: OffersSnapshot | None = None
        self.started = time.monotonic()

    async def listen(self, bus: Bus) -> None:
        """Hear the call log's ``opened``, ``ended`` and ``sealed``, and each tool call asked
        and answered, from now on."""
        for what in ("opened", "ended", "sealed"):
            await bus.subscribe(bus.subjects.call_events(what), CallEvent, self._heard)
        await bus.subscribe(bus.subjects.tools_asked, ToolAsked, self._asked)
        await bus.subscribe(bus.subjects.tool_results, ToolResult, self._result)
        await bus.client.flush()

    async def _asked(self, asked: ToolAsked) -> None:
        self.tools.setdefault((asked.call, asked.id), None)

    async def _result(self, result: ToolResult) -> None:
        self.tools[(result.call, result.id)] = result.error
        self.answered.add((result.call, result.id))

    async def _heard(self, event: CallEvent) -> None:
        self.events[(event.environment, event.room)][event.what] = event
        await self.changes.notify()

    def read_callers(self) -> None:
        """Take the callers' lines written since the last read (whole lines only)."""
        if not self.callers_file.exists():
            return
        with self.callers_file.open("rb") as f:
            f.seek(self._read)
            chunk = f.read()
        whole = chunk[: chunk.rfind(b"\n") + 1]
        self._read += len(whole)
        for line in whole.splitlines():
            if line.strip():
                report = decode(line, CallerReport)
                self.reports[report.caller] = report

    def call_of(self, report: CallerReport, what: str = "opened") -> CallEvent | None:
        """The call log's ``what`` event of ``report``'s room, if heard."""
        if report.room is None:
            return None
        return self.events.get((report.environment, report.room), {}).get(what)

    def ended(self) -> dict[str, CallEvent]:
        """Call → its ``call.ended`` event, of every call heard ended (a chat's says
        ``timeout`` once the reaper ended it quiet)."""
        return {
            seen["ended"].call: seen["ended"] for seen in self.events.values() if "ended" in seen
        }

    def unsealed(self) -> list[str]:
        """Rooms whose call was opened or ended and is not sealed yet, but for the WhatsApp
        threads still open (:meth:`threads_open`): nothing of ``up``'s stop ends those."""
        return [
            room
            for (_, room), seen in self.events.items()
            if "sealed" not in seen and not _thread_open(room, seen)
        ]

    def threads_open(self) -> list[str]:
        """Calls of the WhatsApp threads opened and not ended. A thread is legitimately open
        when ``up`` stops, as it is across a chat replica's restart in production: its contact
        may write again, and only the reaper ends it, quiet 2 h (``timeout``, then sealed);
        ``up`` does not end it for its own stop, nor wait for its seal."""
        return [
            seen["opened"].call
            for (_, room), seen in self.events.items()
            if _thread_open(room, seen)
        ]

    async def wait_sealed(self, timeout_s: float) -> list[str]:
        """Wait until every call opened is sealed, at most ``timeout_s``; the rooms still not."""
        with contextlib.suppress(TimeoutError):
            await self.changes.wait_for(lambda: not self.unsealed(), timeout_s)
        return self.unsealed()

    async def refresh(self) -> None:
        """Read the roster's fleets and the dispatcher's offers (kept as they were when one
        does not answer)."""
        with contextlib.suppress(RosterError):
            self.roster = await self._roster.rows()
        with contextlib.suppress(DispatcherError):
            self.offers = await self._dispatcher.offers()

    async def aclose(self) -> None:
        await self._roster.aclose()
        await self._dispatcher.aclose()

    def table(self, planned: int | None, rate: float) -> str:
        """The progress line and a row per environment (see the README, "Reading the table")."""
        now = dt.datetime.now(dt.UTC)
        reports = list(self.reports.values())
        ended = sum(r.state in ("ended", "refused", "failed") for r in reports)
        silent = sum(is_silent(r, now) for r in reports)
        heard = heard_waits([r for r in reports if r.answered_by and not by_overflow(r)])
        audio = (
            f"first audio p50 {quantile(heard, 0.5):.2f} s, p95 {quantile(heard, 0.95):.2f} s"
            if heard
            else "first audio -"
        )
        progress = (
            f"{time.strftime('%H:%M:%S')}  up {time.monotonic() - self.started:.0f} s  "
            f"calls {len(reports)}{'' if planned is None else f'/{planned}'} placed "
            f"({rate:g}/s), {ended} ended, {silent} silent, {audio}"
        )
        rows = []
        for environment, fleet in ENVIRONMENTS.items():
            mine = [r for r in reports if r.environment == environment]
            answered = [r for r in mine if r.answered_by is not None]
            offered = next(
                (
                    f.in_offers
                    for f in (self.offers.fleets if self.offers else [])
                    if f.fleet == fleet
                ),
                0,
            )
            totals = next(
                (v.totals for v in (self.roster.fleets if self.roster else []) if v.fleet == fleet),
                None,
            )
            rows.append(
                (
                    environment,
                    sum(r.state == "ringing" for r in mine),
                    offered,
                    sum(r.state in ("answered", "heard") for r in mine),
                    sum(not by_overflow(r) for r in answered),
                    sum(by_overflow(r) for r in answered),
                    sum(r.state == "refused" for r in mine),
                    sum(r.first_heard_s is not None for r in mine),
                    sum(r.state in ("ended", "refused", "failed") for r in mine),
                    sum(is_silent(r, now) for r in mine),
                    None if totals is None else f"{totals.seats_free}/{totals.seats}",
                )
            )
        headers = (
            "environment", "ringing", "offered", "talking", "agent", "overflow", "refused",
            "heard", "ended", "silent", "seats free",
        )  # fmt: skip
        return f"{progress}\n{table(headers, rows)}\n{self.tools_line()}"

    def tools_line(self) -> str:
        """The tools and the apps in one line: tool calls asked, answered by the app, timed
        out, run twice (by the apps' ledgers); kills and calls handed between app processes."""
        self.ledgers.read()
        said = tally(self.ledgers.events, self.kills, self.consoles)
        timed_out = sum(self.tools[k] == "timeout" for k in self.answered)
        return (
            f"tools: {len(self.tools)} asked, {len(self.answered) - timed_out} answered by the "
            f"app, {timed_out} timed out, {said['run_twice']} run twice; apps: "
            f"{said['kills']} killed, {said['handed']} calls handed"
        )


def _thread_open(room: str, seen: dict[str, CallEvent]) -> bool:
    """Whether these are the events of a WhatsApp thread's call opened and not ended (its room
    is ``whatsapp-<call>``, :class:`pinecall_chat.conversation.Conversations`'s)."""
    return room.startswith(WHATSAPP_ROOM) and "opened" in seen and "ended" not in seen
