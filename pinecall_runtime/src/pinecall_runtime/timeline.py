"""A call's story for ``logs``: the dispatcher's journal woven into the call's entries.

Pure functions of the two records. The entries keep their log's order (seq: the log is one
ordered record, seed 002) and the journal its own (time); each journal line goes before the first
entry stamped later than it. Each entry is said in a line: its seq, kind, and a short summary of
its data by kind (the kinds of ``pinecall_contracts.entries``).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from typing import Any, Literal

import msgspec

from pinecall_contracts import entries as kinds
from pinecall_contracts.calls import OMITTED, CallRecord, LoggedEntry
from pinecall_contracts.dispatch import JournalLine

WIDTH = 110
"""Characters of a summary at most (the rest is on ``--json``)."""


class Line(msgspec.Struct, frozen=True, kw_only=True):
    """One line of a call's story: an offer's journal line or an entry."""

    at: dt.datetime
    source: Literal["journal", "entry"]
    seq: int | None = None
    kind: str
    text: str


def _stamp(at: dt.datetime) -> str:
    return at.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _short(text: str, width: int = WIDTH) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)


def summary(kind: str, data: dict[str, Any]) -> str:
    """What an entry says, in a few words (``"Hi, I need…" first audio 0.81 s``)."""
    if OMITTED in data and len(data) == 1:
        return f"data omitted from the page ({data[OMITTED]} bytes): GET /v1/calls/CALL/entries"
    if OMITTED in data and "over" in data and len(data) == 2:
        return f"data omitted by its writer ({data[OMITTED]} bytes, over {data['over']})"
    get = data.get
    if kind == kinds.CALL_STARTED:
        return f"worker {get('worker')}, room {get('room')}, agent {get('agent')}"
    if kind in (kinds.TURN_USER, kinds.TURN_AGENT):
        said = f"{get('text', '')!r}" if isinstance(get("text"), str) else _json(get("text"))
        first_audio = get("first_audio_s")
        if isinstance(first_audio, int | float):
            said += f", first audio {first_audio:.2f} s"
        return said + (", interrupted" if get("interrupted") else "")
    if kind == kinds.TURN_TOOL:
        out = "failed" if get("error") else _json(get("output"))
        return f"{get('name')}({get('arguments') or ''}) → {out}"
    if kind == kinds.TOOL_CALL:
        return f"{get('name')}({_json(get('arguments') or {})}), id {get('id')}"
    if kind == kinds.TOOL_RESULT:
        answer = f"error {get('error')}" if get("error") else _json(get("result"))
        return f"id {get('id')}: {answer}"
    if kind == kinds.CALL_ERROR:
        recoverable = ", recoverable" if get("recoverable") else ""
        return f"{get('source')}: {get('what')}{recoverable}"
    if kind == kinds.CALL_SENTENCE:
        return f"{get('text', '')!r} ({get('job')})"
    if kind == kinds.CALL_ENDED:
        cause = f" ({get('cause')})" if get("cause") else ""
        return f"{get('outcome')}{cause}" + (f": {get('reason')}" if get("reason") else "")
    if kind == kinds.CALL_SEALED and not data:
        return ""
    return _json(data)


def weave(call: str, journal: Sequence[JournalLine], log: Sequence[LoggedEntry]) -> list[Line]:
    """The journal and the entries as one story: entries in seq order, each journal line
    before the first entry stamped later than it (ties: the journal first)."""
    offers = [
        Line(
            at=j.at,
            source="journal",
            kind="offer",
            text=j.line.removeprefix(f"room {call}: "),
        )
        for j in sorted(journal, key=lambda j: j.at)
    ]
    said = [
        Line(at=e.ts, source="entry", seq=e.seq, kind=e.kind, text=summary(e.kind, e.data))
        for e in sorted(log, key=lambda e: e.seq)
    ]
    out: list[Line] = []
    i = 0
    for entry in said:
        while i < len(offers) and offers[i].at <= entry.at:
            out.append(offers[i])
            i += 1
        out.append(entry)
    return out + offers[i:]


def header(call: str, record: CallRecord | None) -> list[str]:
    """What the call is, in one or two lines (``call-log holds no such call`` without one)."""
    if record is None:
        return [f"call {call}: call-log holds no such call (never opened)"]
    ended = ""
    if record.ended_at is not None:
        ended = f", ended {_stamp(record.ended_at)}"
    outcome = f" ({record.outcome})" if record.outcome else ""
    if record.outcome and record.cause:
        outcome = f" ({record.outcome}: {record.cause})"
    return [
        f"call {call}: agent {record.agent} ({record.org or 'no org'}) in {record.environment}, "
        f"room {record.room}, worker {record.worker}",
        f"  {record.state}{outcome}; opened {_stamp(record.opened_at)}{ended}; "
        f"{record.last_seq} entries, {record.written} from its writer",
    ]


def text(line: Line) -> str:
    """A story line as ``logs`` prints it: time (UTC), then ``#<seq>``, kind and summary for an
    entry, or ``offer`` and the journal's line for an offer."""
    if line.source == "journal":
        return f"{_stamp(line.at)}  {'offer':<6} {_short(line.text)}"
    return f"{_stamp(line.at)}  {f'#{line.seq}':<6} {line.kind:<14} {_short(line.text)}".rstrip()
