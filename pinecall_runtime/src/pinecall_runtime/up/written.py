"""Written calls under ``up --chats N`` (issue 17, "In the main job"): what the chat visitors say,
the table's line of them, and the report's ``written`` section, every chat's log read back.

Sources, each the one that knows: the visitors (``lab chats --out``: a
:class:`~pinecall_contracts.lab.ChatReport` line at each change: the messages sent and answered,
the dials, the cuts and the takes-up); the call log's events on NATS (:class:`Watch`'s: a chat's
``call.ended`` says ``timeout`` once the reaper ended it quiet); and, at the end, each chat's
record and entries (the operator key, :class:`~pinecall_clients.calllog.CallLogClient`).

A chat's log *verifies* as a voice call's does (:func:`pinecall_runtime.up.report.verify`:
sealed, seqs 1, 2, … with no gap, the writer's entries each once in order) and, written, holds
each message the visitor sent once, in the order sent, each followed by one reply
(:func:`verify_chat`). A visitor that failed (a close it may not dial again after, too many
cuts), a message sent and never answered, or a log that does not verify is a problem: ``up``
exits 1. A visitor the stop cut off (``stopped``) is no fault of the platform.

With ``--chat-restarts N`` a chat replica is SIGKILLed every N s while the visitors write
(:func:`restarting`), the replicas in turn, and started again; its visitors dial the other with
``?call=`` and their chats are *taken up*.

WhatsApp's waiting and let-go messages are counted once the WhatsApp contacts run here (its
branch): the fields stand at 0 until then, with a note saying so.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from pathlib import Path
from typing import Any

import click
import httpx

from pinecall_clients.calllog import CallLogClient
from pinecall_clients.errors import CallLogError
from pinecall_contracts.base import decode
from pinecall_contracts.calls import CallEvent, CallLog, CallRecord
from pinecall_contracts.entries import TURN_AGENT, TURN_USER
from pinecall_contracts.lab import ChatReport
from pinecall_runtime.loaddrive import quantile
from pinecall_runtime.up.report import quantiles, verify
from pinecall_runtime.up.supervise import Supervised

WHATSAPP_NOTE = (
    "waiting and let_go count WhatsApp messages (message.waiting, let go outside the 24-hour "
    "window): 0 until up runs WhatsApp contacts through the Cloud API fake"
)
READ_WITHIN_S = 5.0
"""A chat's record and entries are read again this long while call-log gives no answer."""


class Chats:
    """The chat visitors as ``up`` knows them (``<state dir>/chats.jsonl``, read as it grows)."""

    def __init__(self, file: Path) -> None:
        self.file = file
        self.reports: dict[int, ChatReport] = {}
        self._read = 0

    def read(self) -> None:
        """Take the visitors' lines written since the last read (whole lines only)."""
        if not self.file.exists():
            return
        with self.file.open("rb") as f:
            f.seek(self._read)
            chunk = f.read()
        whole = chunk[: chunk.rfind(b"\n") + 1]
        self._read += len(whole)
        for line in whole.splitlines():
            if line.strip():
                report = decode(line, ChatReport)
                self.reports[report.visitor] = report

    def line(self, planned: int, ended: dict[str, CallEvent]) -> str:
        """The table's chats line: visitors started of ``planned``, chats opened, answered
        (every message sent had its reply), taken up after a cut, timed out (``ended``: call →
        its ``call.ended`` event), the reply start as the visitors saw it."""
        reports = list(self.reports.values())
        starts = [s for r in reports for s in r.reply_start_s]
        start = (
            f"reply start p50 {quantile(starts, 0.5):.2f} s, p95 {quantile(starts, 0.95):.2f} s"
            if starts
            else "reply start -"
        )
        timed_out = sum(
            r.call is not None and _outcome(ended.get(r.call)) == "timeout" for r in reports
        )
        return (
            f"chats: {len(reports)}/{planned} visitors, {sum(r.call is not None for r in reports)} "
            f"opened, {sum(_answered(r) for r in reports)} answered, "
            f"{sum(r.resumed > 0 for r in reports)} taken up, {timed_out} timed out, "
            f"{sum(r.state == 'failed' for r in reports)} failed; {start}"
        )


async def restarting(
    every_s: float, replicas: list[Supervised], chats: Chats, kills: list[str]
) -> None:
    """Every ``every_s``, SIGKILL the next of ``replicas`` (in turn), each kill's replica and
    time said on stderr and in ``kills``; a process's supervisor starts it again. A kill waits
    until a visitor of ``chats`` is chatting (a kill then cuts a chat) and every replica answers
    ``/readyz`` (one started again is ready), so a visitor cut off always has another to dial.
    Runs until cancelled."""
    turn = 0
    async with httpx.AsyncClient(timeout=1.0) as http:
        while True:
            await asyncio.sleep(every_s)
            while True:
                chats.read()
                try:
                    answers = [await http.get(f"{r.url}/readyz") for r in replicas]
                    ready = all(a.status_code == 200 for a in answers)
                except httpx.HTTPError:
                    ready = False
                if ready and any(r.state == "chatting" for r in chats.reports.values()):
                    break
                await asyncio.sleep(0.2)  # neither gives a signal of its own
            victim = replicas[turn % len(replicas)]
            turn += 1
            click.echo(f"up: SIGKILL {victim.name} (--chat-restarts)", err=True)
            victim.kill()
            kills.append(f"{victim.name} {dt.datetime.now(dt.UTC).isoformat()}")


def _outcome(event: CallEvent | None) -> str | None:
    return None if event is None else event.outcome


def _answered(report: ChatReport) -> bool:
    """Every message the visitor meant to send was sent and answered (its state ``done``)."""
    return report.state == "done" and set(report.answered) == set(report.sent)


def verify_chat(record: CallRecord, log: CallLog, report: ChatReport) -> str | None:
    """What is wrong with a chat's log beyond :func:`~pinecall_runtime.up.report.verify` (None
    when it holds): a written call of channel ``chat``, whose ``turn.user`` entries are the
    visitor's messages once each, in the order it sent them (those it sent, when the stop cut it
    off), each followed by exactly one ``turn.agent`` replying to it."""
    if record.channel != "chat":
        return f"{log.call}: a visitor's call with channel {record.channel}, not chat"
    entries = sorted(log.entries, key=lambda e: e.seq)
    users = [e.data.get("message") for e in entries if e.kind == TURN_USER]
    replies = [e.data.get("reply_to") for e in entries if e.kind == TURN_AGENT]
    if users != report.sent[: len(users)] or (report.state == "done" and users != report.sent):
        return f"{log.call}: its messages are {users}, the visitor sent {report.sent}"
    if sorted(map(str, replies)) != sorted(map(str, report.answered)) or len(set(replies)) != len(
        replies
    ):
        return f"{log.call}: its replies answer {replies}, the visitor had {report.answered}"
    seen: set[object] = set()
    for e in entries:
        if e.kind == TURN_USER:
            seen.add(e.data.get("message"))
        elif e.kind == TURN_AGENT and e.data.get("reply_to") not in seen:
            return f"{log.call}: a reply to {e.data.get('reply_to')} before its message"
    return None


async def build(
    chats: Chats,
    ended: dict[str, CallEvent],
    *,
    operator_key: str,
    call_log: str,
    planned: int,
    kills: list[str] | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """The report's ``written`` section and its problems, every chat's log read back (the
    verifier :func:`~pinecall_runtime.up.report.verify` of the voice calls, then
    :func:`verify_chat`)."""
    reports = sorted(chats.reports.values(), key=lambda r: r.visitor)
    problems: list[str] = []
    for r in reports:
        if r.state == "failed":
            problems.append(f"chat visitor {r.visitor} ({r.environment}): {r.error}")
        elif r.state == "done" and not _answered(r):
            missing = sorted(set(r.sent) - set(r.answered))
            problems.append(f"chat visitor {r.visitor}: messages {missing} never answered")
        elif r.state in ("dialling", "chatting"):
            problems.append(f"chat visitor {r.visitor}: still {r.state} when up stopped")
    opened = [r for r in reports if r.call is not None]
    async with CallLogClient(call_log, operator_key, request_timeout_s=30.0) as log:
        limit = asyncio.Semaphore(8)

        async def one(call: str) -> tuple[CallRecord, CallLog] | str:
            async with limit:
                try:
                    record = await log.record(call, within_s=READ_WITHIN_S)
                    return record, await log.entries(call, within_s=READ_WITHIN_S)
                except (CallLogError, ValueError) as exc:
                    return f"{call}: its log could not be read: {exc}"

        read = await asyncio.gather(*(one(r.call) for r in opened if r.call is not None))
    verified = entries = timed_out = asked = answered_tools = tools_timed_out = 0
    rows: dict[int, dict[str, Any]] = {}
    for report, got in zip(opened, read, strict=True):
        if isinstance(got, str):
            problems.append(got)
            continue
        record, call_log_read = got
        entries += len(call_log_read.entries)
        wrong = verify(record, call_log_read) or verify_chat(record, call_log_read, report)
        verified += wrong is None
        problems += [wrong] if wrong else []
        timed_out += record.outcome == "timeout"
        asked += sum(e.kind == "tool.call" for e in call_log_read.entries)
        results = [e.data.get("error") for e in call_log_read.entries if e.kind == "tool.result"]
        answered_tools += len(results) - results.count("timeout")
        tools_timed_out += results.count("timeout")
        rows[report.visitor] = {
            "outcome": record.outcome,
            "entries": len(call_log_read.entries),
            "verified": wrong is None,
        }
    section = {
        "visitors": len(reports),
        "planned": planned,
        "opened": len(opened),
        "answered": sum(_answered(r) for r in reports),
        "taken_up": sum(r.resumed > 0 for r in reports),
        "timed_out": timed_out,
        "waiting": 0,
        "let_go": 0,
        "note": WHATSAPP_NOTE,
        "failed": sum(r.state == "failed" for r in reports),
        "stopped": sum(r.state == "stopped" for r in reports),
        "messages": {
            "sent": sum(len(r.sent) for r in reports),
            "answered": sum(len(r.answered) for r in reports),
            "replayed": sum(r.replayed for r in reports),
        },
        "tools": {
            "asked": asked,
            "answered_by_the_app": answered_tools,
            "timed_out": tools_timed_out,
        },
        "replica_kills": list(kills or []),
        "dials": sum(r.dials for r in reports),
        "cuts": sum(r.cuts for r in reports),
        "logs": len(opened),
        "logs_verified": verified,
        "entries": entries,
        "reply_start_s": quantiles([s for r in reports for s in r.reply_start_s]),
        "chats": [
            {
                "visitor": r.visitor,
                "environment": r.environment,
                "call": r.call,
                "state": r.state,
                "sent": len(r.sent),
                "answered": len(r.answered),
                "resumed": r.resumed,
                "error": r.error,
            }
            | rows.get(r.visitor, {})
            for r in reports
        ],
    }
    return section, problems


def summary(written: dict[str, Any]) -> str:
    """The ``written`` section in one line for the terminal."""
    start = written["reply_start_s"]
    p50 = "-" if start["p50"] is None else f"{start['p50']:.2f} s"
    p95 = "-" if start["p95"] is None else f"{start['p95']:.2f} s"
    return (
        f"up: chats: {written['opened']} opened, {written['answered']} answered, "
        f"{written['taken_up']} taken up, {written['timed_out']} timed out; "
        f"{written['logs_verified']} of {written['logs']} logs verified "
        f"({written['entries']} entries); reply start p50 {p50}, p95 {p95}"
    )
