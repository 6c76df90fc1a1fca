"""The run's JSON report: every call placed, how it was answered, and its log read back.

Read once the calls ended and their logs were sealed, while the services still run:

- each call's log (``GET /v1/calls/{call}`` and ``/entries``, the operator key, through
  :class:`~pinecall_clients.calllog.CallLogClient`): *verified* when
  it is sealed, its seqs run 1, 2, … with no gap, the writer's entries are counted 0, 1, … up to
  the record's ``written``, in order (seed 002: nothing lost, nothing doubled), and it names the
  worker whose voice the caller heard;
- the first audio of each agent turn the log holds (``turn.agent``'s ``first_audio_s``:
  livekit-agents' ``e2e_latency``), beside the first audio each caller heard after its first line;
- each call's offers (the dispatcher's journal, ``GET /v1/ops/calls/{call}/journal``, through
  :class:`~pinecall_clients.dispatcher.DispatcherClient`): the lines
  that offer it to a worker or give it to the overflow;
- each agent's log per environment (``GET /v1/agents/{agent}/log``): ``callback.requested`` for
  every phone the overflow answered (seed 000, "Full, at the endpoint");
- the call backs dialled (issue 18, acceptance 6; :func:`call_backs`, read by
  :mod:`pinecall_runtime.up.callbacks`): requested, dialled, answered, not reached, given up,
  dialled twice (a problem), waiting at the end;
- the tools (issue 16, "In the main job"): each call's ``tool.call`` entries (asked) and
  ``tool.result`` entries (answered by the app, or ``error: "timeout"``: timed out) on its log;
  the app processes' ledgers for the rest (:func:`pinecall_runtime.up.apps.tally`: tool calls
  run twice by the apps' own count, calls handed between app processes, the kills of
  ``--app-restarts`` and the seconds from each loss to the call attached elsewhere).

:func:`failed` says why the run did not hold (a silent caller, a log that did not verify, a
phone the overflow answered with no call back, a visitor refused for another reason than a full
fleet or with no call back taken, a call never placed, a tool call whose handler ran twice, a
call handed to a console); ``up`` exits non-zero then.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from pinecall_clients.calllog import CallLogClient
from pinecall_clients.dispatcher import DispatcherClient
from pinecall_clients.errors import CallLogError, DispatcherError
from pinecall_contracts.calls import AgentEntry, AgentLog, CallLog, CallRecord
from pinecall_contracts.lab import CallerReport
from pinecall_contracts.words import counted
from pinecall_runtime.loaddrive import quantile
from pinecall_runtime.up.apps import tally
from pinecall_runtime.up.watch import SILENT_S, Watch, by_overflow, heard_waits, is_silent

OFFER_MARKS = (": offered to ", ": to the overflow ")
"""What a journal line of an offer says (``pinecall_dispatcher.domain``: ``Offer.journal`` and
``Overflow.journal``)."""


def quantiles(values: list[float]) -> dict[str, float | None]:
    """``{"p50", "p95"}`` of ``values`` in seconds (None for none)."""
    if not values:
        return {"p50": None, "p95": None}
    return {"p50": round(quantile(values, 0.5), 3), "p95": round(quantile(values, 0.95), 3)}


def verify(record: CallRecord, log: CallLog) -> str | None:
    """What is wrong with ``log`` (None when it holds): sealed, seqs without a gap, the writer's
    ``written`` entries counted once each, in order."""
    seqs = [e.seq for e in log.entries]
    counted = [e.counted for e in log.entries if e.counted is not None]
    if seqs != list(range(1, len(seqs) + 1)):
        return f"{log.call}: its seqs have a gap or a repeat"
    if counted != list(range(record.written)):
        return (
            f"{log.call}: the writer's {record.written} entries are not each there once, in order"
        )
    if log.state != "sealed":
        return f"{log.call}: not sealed ({log.state})"
    return None


def stopped_unopened(report: CallerReport, status: int | None) -> bool:
    """Whether a caller's call the log did not serve (``status``) was only cut off by up's stop:
    stopped before any agent answered, its call never opened (404). Such a call is no fault of
    the platform: stop 12's trial saw ``up --duration`` exit 1 for a visitor who got its token
    70 ms before the stop."""
    return status == 404 and report.error == "stopped" and not report.answered_by


READ_WITHIN_S = 5.0
"""A call's record and entries are read again this long while call-log gives no answer."""


async def _call(log: CallLogClient, dispatcher: DispatcherClient, call: str) -> Any:
    record = await log.record(call, within_s=READ_WITHIN_S)
    entries = await log.entries(call, within_s=READ_WITHIN_S)
    journal = await dispatcher.journal(call)
    return record, entries, journal


async def build(
    watch: Watch, *, operator_key: str, call_log: str, dispatcher: str, agent: str
) -> dict[str, Any]:
    """The report of the run ``watch`` saw (its callers, their calls' logs), as JSON values."""
    now = dt.datetime.now(dt.UTC)
    reports = sorted(watch.reports.values(), key=lambda r: r.caller)
    calls: dict[int, str] = {}
    for r in reports:
        opened = watch.call_of(r)
        if r.call or opened:
            calls[r.caller] = r.call or opened.call  # type: ignore[union-attr]
    problems: list[str] = []
    async with (
        CallLogClient(call_log, operator_key, request_timeout_s=30.0) as log,
        DispatcherClient(dispatcher, operator_key, timeout_s=30.0) as journals,
    ):
        limit = asyncio.Semaphore(8)
        by_caller = {r.caller: r for r in reports}
        stopped: set[int] = set()
        """Callers cut off by the stop before their call opened: no log to read, no fault."""

        async def one(caller: int, call: str) -> Any:
            async with limit:
                try:
                    return await _call(log, journals, call)
                except (CallLogError, DispatcherError) as exc:
                    if stopped_unopened(by_caller[caller], exc.status):
                        stopped.add(caller)
                    else:
                        problems.append(f"{call}: its log or journal could not be read: {exc}")
                    return None
                except ValueError as exc:  # an answer that is no record, log or journal
                    problems.append(f"{call}: its log or journal could not be read: {exc!r}")
                    return None

        answers = await asyncio.gather(*(one(caller, call) for caller, call in calls.items()))
        read = {c: a for c, a in zip(calls, answers, strict=True) if c not in stopped}
        logs: dict[str, AgentLog | None] = {}
        for environment in sorted({r.environment for r in reports}):
            try:
                logs[environment] = await log.agent_log(
                    agent, environment=environment, within_s=READ_WITHIN_S
                )
            except (CallLogError, ValueError):
                logs[environment] = None
    callbacks = {
        str(e.data.get("call")): e.data
        for log in logs.values()
        if log is not None
        for e in log.entries
        if e.kind == "callback.requested"
    }
    written = verified = 0
    asked = answered = timed_out = 0
    turns: list[float] = []
    offers: list[int] = []
    rows: dict[int, dict[str, Any]] = {}
    for caller, got in read.items():
        if got is None:
            continue
        record, log, journal = got
        written += len(log.entries)
        wrong = verify(record, log)
        heard_from = by_caller[caller].answered_by
        if wrong is None and heard_from and record.worker != heard_from:
            wrong = f"{log.call}: the log names {record.worker}, the caller heard {heard_from}"
        verified += wrong is None
        problems += [wrong] if wrong else []
        turns += [
            float(e.data["first_audio_s"])
            for e in log.entries
            if e.kind == "turn.agent" and e.data.get("first_audio_s") is not None
        ]
        offers.append(sum(any(m in line.line for m in OFFER_MARKS) for line in journal.lines))
        results = [e.data.get("error") for e in log.entries if e.kind == "tool.result"]
        asked += (tools := sum(e.kind == "tool.call" for e in log.entries))
        timed_out += results.count("timeout")
        answered += len(results) - results.count("timeout")
        rows[caller] = {
            "call": record.call,
            "outcome": record.outcome,
            "entries": len(log.entries),
            "verified": wrong is None,
            "offers": offers[-1],
            "tools": tools,
        }
    agent_calls = [r for r in reports if r.answered_by and not by_overflow(r)]
    overflowed = [r for r in reports if by_overflow(r)]
    phones_overflowed = [r for r in overflowed if r.kind == "sip"]
    silent = [r for r in reports if is_silent(r, now)]
    no_callback = [r.caller for r in phones_overflowed if calls.get(r.caller) not in callbacks]
    # a caller up stopped before its call was opened is not a fault (one left silent is)
    unplaced = [
        r
        for r in reports
        if r.state == "failed" or (r.caller not in calls and r.room and r.error != "stopped")
    ]
    refused = Counter(r.refused for r in reports if r.state == "refused")
    problems += [f"caller {r.caller}: silent for {SILENT_S:.0f} s from arrival" for r in silent]
    problems += [f"caller {c}: the overflow answered, no call back on the log" for c in no_callback]
    problems += [f"caller {r.caller}: {r.error or 'no call was opened'}" for r in unplaced]
    problems += [
        f"caller {r.caller}: refused {r.refused}" + ("" if r.callback else ", no call back taken")
        for r in reports
        if r.state == "refused" and (r.refused != "fleet_full" or not r.callback)
    ]
    watch.ledgers.read()
    apps = tally(watch.ledgers.events, watch.kills, watch.consoles)
    problems += [
        f"tool call {t['id']} of {t['call']}: its handler ran {t['runs']} times (the apps' count)"
        for t in apps["run_twice_ids"]
    ]
    problems += [f"a console was handed a call: {said}" for said in apps["console_attached"]]
    return {
        "calls": {
            "placed": len(reports),
            "answered_by_agent": len(agent_calls),
            "heard_the_agent": sum(r.first_heard_s is not None for r in agent_calls),
            "answered_by_overflow": len(overflowed),
            "heard_the_overflow": sum(r.first_heard_s is not None for r in overflowed),
            "refused_at_the_endpoint": dict(refused),
            "silent": len(silent),
            "failed": sum(r.state == "failed" for r in reports),
            "by_kind": dict(Counter(r.kind for r in reports)),
            "by_environment": dict(Counter(r.environment for r in reports)),
        },
        "entries": {"written": written, "logs": len(read), "logs_verified": verified},
        "first_audio_s": {
            "heard_by_the_caller": quantiles(heard_waits(agent_calls)),
            "turns_on_the_log": quantiles(turns),
        },
        "offers_per_call": {
            "mean": round(sum(offers) / len(offers), 2) if offers else None,
            "most": max(offers, default=None),
            "counts": {str(k): v for k, v in sorted(Counter(offers).items())},
        },
        "tools": {
            "asked": asked,
            "answered_by_the_app": answered,
            "timed_out": timed_out,
            "unanswered": asked - answered - timed_out,
            "runs": apps["runs"],
            "run_twice": apps["run_twice"],
            "run_twice_ids": apps["run_twice_ids"],
        },
        "apps": {
            "processes": sorted({e.instance for e in watch.ledgers.events}),
            "kills": apps["kills"],
            "killed": apps["killed"],
            "handed": apps["handed"],
            "attached": apps["attached"],
            "console_attached": len(apps["console_attached"]),
            "held_at_a_kill": apps["held_at_a_kill"],
            "attached_after_a_kill": apps["attached_after_a_kill"],
            "loss_to_attached_s": apps["loss_to_attached_s"],
        },
        "callbacks": {
            "phones_overflowed": len(phones_overflowed),
            "on_the_agent_log": len(phones_overflowed) - len(no_callback),
            "visitors_refused_called_back": sum(r.callback for r in reports),
        },
        "problems": problems,
        "callers": [
            {
                "caller": r.caller,
                "kind": r.kind,
                "environment": r.environment,
                "room": r.room,
                "answered_by": r.answered_by,
                "first_heard_s": r.first_heard_s,
                "ended_by": r.ended_by,
                "refused": r.refused,
                # when, as the caller saw it: what --plot draws over the run
                "arrived_at": r.arrived_at.isoformat() if r.arrived_at else None,
                "answered_s": r.answered_s,
                "ended_at": r.ended_at.isoformat() if r.ended_at else None,
                "waits_s": r.waits_s,
            }
            | rows.get(r.caller, {})
            for r in reports
        ],
    }


def call_backs(
    entries: Mapping[str, Sequence[AgentEntry]], legs: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """The report's call backs dialled (issue 18, acceptance 6), from each environment's
    ``callback.*`` entries of the agent's log and the stand-ins' outbound SIP legs: *requested*
    (``callback.requested``), *dialled* (tries, ``callback.dialled`` by its try key),
    *answered*, *not reached* (tries), *given up* (call backs), *dialled twice* (a try whose
    entry is on the log twice, or whose room got more than one SIP leg: a problem), and
    *waiting* at the end (requested, neither answered nor given up)."""
    requested: set[tuple[str, int]] = set()
    done: set[tuple[str, int]] = set()
    tries: Counter[tuple[str, str]] = Counter()
    rooms: set[str] = set()
    kinds: Counter[str] = Counter()
    for environment, found in entries.items():
        for e in found:
            kinds[e.kind] += 1
            if e.kind == "callback.requested":
                requested.add((environment, e.seq))
            elif e.kind in ("callback.answered", "callback.given_up"):
                done.add((environment, int(e.data.get("callback", 0))))
            elif e.kind == "callback.dialled":
                tries[(environment, str(e.data.get("key")))] += 1
                rooms.add(f"out-{e.data.get('call')}")
    per_room = Counter(str(leg["room"]) for leg in legs if leg["room"] in rooms)
    twice = sum(n > 1 for n in tries.values()) + sum(n > 1 for n in per_room.values())
    return {
        "requested": len(requested),
        "dialled": len(tries),
        "answered": kinds["callback.answered"],
        "not_reached": kinds["callback.not_reached"],
        "given_up": kinds["callback.given_up"],
        "dialled_twice": twice,
        "waiting": len(requested - done),
    }


def call_backs_line(counts: Mapping[str, Any]) -> str:
    """The terminal's call backs line: ``up: call backs: 2 requested, 2 dialled, …``."""
    return (
        f"up: call backs: {counts['requested']} requested, {counts['dialled']} dialled, "
        f"{counts['answered']} answered, {counts['not_reached']} not reached, "
        f"{counts['given_up']} given up, {counts['dialled_twice']} dialled twice, "
        f"{counts['waiting']} waiting at the end"
    )


def call_backs_problems(counts: Mapping[str, Any]) -> list[str]:
    """A call back dialled twice is a problem (a try is one call, whatever restarts)."""
    if counts.get("dialled_twice"):
        return [f"call backs: {counts['dialled_twice']} tries dialled twice"]
    return []


def failed(report: dict[str, Any]) -> bool:
    """Whether the run did not hold: anything in ``problems`` (see the module docstring)."""
    return bool(report["problems"])


def summary(result: dict[str, Any]) -> str:
    """The report in three lines for the terminal (the whole of it is in ``--report``). Its
    tools are the calls' and the chats' (``written.tools``), as the live table's line counts
    every tool call asked; run twice is the apps' count, which has both."""
    calls, entries, heard = result["calls"], result["entries"], result["first_audio_s"]
    apps, chats = result["apps"], result.get("written", {}).get("tools", {})
    tools = {k: result["tools"][k] + chats.get(k, 0)
             for k in ("asked", "answered_by_the_app", "timed_out")}  # fmt: skip
    by_chats = f" ({chats['asked']} by chats)" if chats.get("asked") else ""
    loss = apps["loss_to_attached_s"]
    audio = heard["heard_by_the_caller"]
    refused = sum(calls["refused_at_the_endpoint"].values())
    agents, heard_them = calls["answered_by_agent"], calls["heard_the_agent"]
    deaf = "" if heard_them == agents else f" ({agents - heard_them} never heard it)"
    failed = f", {calls['failed']} failed" if calls["failed"] else ""
    return (
        f"up: {counted(calls['placed'], 'call')}: {agents} answered by an agent{deaf}, "
        f"{calls['answered_by_overflow']} by the overflow, {refused} refused at the endpoint, "
        f"{calls['silent']} silent{failed}\n"
        f"up: {entries['logs_verified']} of {entries['logs']} logs verified "
        f"({entries['written']} entries); first audio heard p50 {_s(audio['p50'])}, "
        f"p95 {_s(audio['p95'])}; offers per call {result['offers_per_call']['mean']}\n"
        f"up: tools: {tools['asked']} asked{by_chats}, {tools['answered_by_the_app']} answered "
        f"by the app, {tools['timed_out']} timed out, {result['tools']['run_twice']} run twice; "
        "apps: "
        f"{apps['kills']} killed, {apps['handed']} calls handed, loss to attached p50 "
        f"{_s(loss['p50'])}, p99 {_s(loss['p99'])}"
    ) + (
        f"\n{call_backs_line(backs)}" if "dialled" in (backs := result.get("callbacks", {})) else ""
    )


def _s(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.2f} s"
