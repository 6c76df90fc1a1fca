"""A call's story: the journal woven into the entries, the entries in their log's order."""

from __future__ import annotations

import datetime as dt
from typing import Any

from pinecall_contracts.calls import CallRecord, LoggedEntry
from pinecall_contracts.dispatch import JournalLine
from pinecall_runtime.timeline import header, summary, text, weave

T0 = dt.datetime(2026, 11, 30, 6, 45, tzinfo=dt.UTC)


def at(s: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=s)


def journal(s: float, line: str) -> JournalLine:
    return JournalLine(call="call_1", room="r1", fleet="pinecall", at=at(s), line=line)


def entry(seq: int, s: float, kind: str, **data: Any) -> LoggedEntry:
    return LoggedEntry(seq=seq, kind=kind, ts=at(s), data=data)


def test_journal_lines_go_before_the_first_entry_stamped_later_and_entries_keep_seq_order() -> None:
    story = weave(
        "call_1",
        [
            journal(2.5, "room call_1: opened by pinecall/worker-a.1"),
            journal(0.0, "room call_1: offered to pinecall/worker-a.1: 3 seats free (offer 1)"),
        ],
        [
            entry(3, 2.0, "turn.agent", text="Hello"),  # a writer's clock a little behind
            entry(1, 1.0, "call.started", worker="pinecall/worker-a.1", room="r1", agent="bot"),
            entry(2, 3.0, "turn.user", text="Hi"),
        ],
    )
    assert [(line.kind, line.seq) for line in story] == [
        ("offer", None),
        ("call.started", 1),
        ("offer", None),
        ("turn.user", 2),
        ("turn.agent", 3),
    ]
    assert story[0].text == "offered to pinecall/worker-a.1: 3 seats free (offer 1)"
    assert text(story[1]) == (
        "2026-11-30 06:45:01.000  #1     call.started   "
        "worker pinecall/worker-a.1, room r1, agent bot"
    )


def test_a_journal_without_entries_is_told_whole() -> None:
    story = weave("call_1", [journal(0, "room call_1: to the overflow pinecall/overflow: x")], [])
    assert [line.text for line in story] == ["to the overflow pinecall/overflow: x"]


def test_each_kind_is_summed_up_in_a_few_words() -> None:
    assert summary("turn.agent", {"text": "Sure", "first_audio_s": 0.812}) == (
        "'Sure', first audio 0.81 s"
    )
    assert summary("turn.agent", {"text": "x", "first_audio_s": "bad"}) == "'x'"
    assert summary("call.error", {"source": "tts", "what": "timeout", "recoverable": True}) == (
        "tts: timeout, recoverable"
    )
    assert summary("call.ended", {"outcome": "drained", "reason": "worker died"}) == (
        "drained: worker died"
    )
    ended = {"outcome": "drained", "reason": "agent lost", "cause": "lost_agent"}
    assert summary("call.ended", ended) == "drained (lost_agent): agent lost"
    assert summary("tool.result", {"id": "t1", "error": "timeout"}) == "id t1: error timeout"
    assert summary("call.sealed", {}) == ""
    assert summary("something.new", {"a": 1}) == '{"a":1}'
    assert "omitted" in summary("turn.user", {"omitted_bytes": 2_000_000})
    assert summary("turn.agent", {"omitted_bytes": 70_000, "over": 65_536}) == (
        "data omitted by its writer (70000 bytes, over 65536)"
    )
    long = text(weave("c", [], [entry(1, 0, "turn.user", text="word " * 100)])[0])
    assert long.endswith("…")
    assert len(long) < 160


def test_the_header_names_a_drained_calls_cause() -> None:
    record = CallRecord(
        call="call_1",
        agent="support-bot",
        org="org_acme",
        environment="production",
        room="r1",
        worker="pinecall/worker-a.1791067258",
        state="sealed",
        written=3,
        last_seq=6,
        outcome="drained",
        cause="stale",
        opened_at=at(0),
        ended_at=at(400),
    )
    assert header("call_1", record)[1].startswith("  sealed (drained: stale); opened ")
