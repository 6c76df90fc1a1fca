"""What ``up``'s report says, from records alone (no platform is started): the plot of its
callers, the summary, the apps' ledgers, a call's log and recording verified, a chat's log, who
is silent. ``up`` run for real: test_up.py."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import click
import msgspec
import pytest

from pinecall_contracts.base import encode
from pinecall_contracts.calls import CallLog, CallRecord, LoggedEntry
from pinecall_contracts.lab import AppEvent, CallerReport, ChatReport
from pinecall_runtime.plots import draw_up, up_series
from pinecall_runtime.up.apps import Kill, Ledgers, holders, tally, wait_held
from pinecall_runtime.up.outbound import PLAN, Outbound, Placed
from pinecall_runtime.up.outbound import summary as outbound_summary
from pinecall_runtime.up.recordings import verify as recording_wrong
from pinecall_runtime.up.report import stopped_unopened, summary, verify
from pinecall_runtime.up.stage import Run
from pinecall_runtime.up.supervise import Supervised
from pinecall_runtime.up.watch import is_silent
from pinecall_runtime.up.written import verify_chat

T0 = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)


def test_the_plot_counts_callers_ringing_talking_and_ended_each_second(tmp_path: Path) -> None:
    """From the report's callers alone: one answered 1.5 s after it arrived and ended at 4 s,
    one arriving at 1 s still ringing at its end, a visitor refused at the endpoint (no room:
    ended from the start)."""
    callers = [
        {"arrived_at": T0.isoformat(), "answered_s": 1.5, "waits_s": [0.8, 1.1],
         "ended_at": (T0 + dt.timedelta(seconds=4)).isoformat()},
        {"arrived_at": (T0 + dt.timedelta(seconds=1)).isoformat(), "answered_s": None,
         "waits_s": [], "ended_at": (T0 + dt.timedelta(seconds=3)).isoformat()},
        {"arrived_at": None, "answered_s": None, "waits_s": [], "ended_at": None},
    ]  # fmt: skip
    series = up_series(callers)
    assert series["t"][:6] == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    assert series["ringing"][:6] == [1, 2, 1, 0, 0, 0]
    assert series["talking"][:6] == [0, 0, 1, 1, 0, 0]
    assert series["ended"][:6] == [1, 1, 1, 2, 3, 3]
    path = tmp_path / "up.png"
    draw_up({"callers": callers, "first_audio_s": {"heard_by_the_caller": {"p50": 0.9}}}, path)
    assert path.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


def test_the_summary_says_callers_an_agent_answered_and_never_heard_and_the_failed() -> None:
    result = {
        "calls": {
            "placed": 5, "answered_by_agent": 3, "heard_the_agent": 2, "answered_by_overflow": 1,
            "refused_at_the_endpoint": {}, "silent": 1, "failed": 1,
        },
        "entries": {"written": 9, "logs": 4, "logs_verified": 4},
        "first_audio_s": {"heard_by_the_caller": {"p50": 0.8, "p95": 0.9}},
        "offers_per_call": {"mean": 1.0},
        "tools": {"asked": 4, "answered_by_the_app": 3, "timed_out": 1, "run_twice": 0},
        "apps": {"kills": 2, "handed": 3, "loss_to_attached_s": {"p50": 0.1, "p99": None}},
    }  # fmt: skip
    said = summary(result).splitlines()
    assert said[0] == (
        "up: 5 calls: 3 answered by an agent (1 never heard it), 1 by the overflow, "
        "0 refused at the endpoint, 1 silent, 1 failed"
    )
    assert said[2] == (
        "up: tools: 4 asked, 3 answered by the app, 1 timed out, 0 run twice; apps: 2 killed, "
        "3 calls handed, loss to attached p50 0.10 s, p99 -"
    )
    # the chats' tool calls too, as the live table counts them
    result["written"] = {"tools": {"asked": 2, "answered_by_the_app": 1, "timed_out": 1}}
    assert summary(result).splitlines()[2] == (
        "up: tools: 6 asked (2 by chats), 4 answered by the app, 2 timed out, 0 run twice; "
        "apps: 2 killed, 3 calls handed, loss to attached p50 0.10 s, p99 -"
    )


def event(instance: str, what: str, s: float, call: str = "c1", **fields: str) -> AppEvent:
    return AppEvent(
        instance=instance, what=what, at=T0 + dt.timedelta(seconds=s), call=call, **fields
    )  # type: ignore[arg-type]


def test_the_ledgers_say_runs_twice_hand_overs_and_the_loss_to_attached_seconds() -> None:
    """a holds c1 and c2; a is killed at 10 s; c1 is attached to b 0.2 s later and its tool
    call t1, entered by a before the kill, is entered again by b (run twice); c2 ended before
    the kill (a detached it), so the kill took only c1; the console was handed nothing."""
    events = [
        event("a", "attached", 1, why="new"),
        event("a", "attached", 2, call="c2", why="new"),
        event("a", "tool", 3, tool="book_table", id="t1"),
        event("a", "detached", 4, call="c2", why="ended"),
        event("b", "attached", 10.2, why="handed"),
        event("b", "tool", 10.3, tool="book_table", id="t1"),
        event("b", "tool", 11, tool="book_table", id="t2"),
    ]
    kills = [Kill(instance="a", at=T0 + dt.timedelta(seconds=10), held=1)]
    assert holders(events, [], until=T0 + dt.timedelta(seconds=5)) == {"c1": "a"}
    assert holders(events, kills) == {"c1": "b"}
    said = tally(events, kills, consoles={"console"})
    assert (said["runs"], said["run_twice"]) == (3, 1)
    assert said["run_twice_ids"] == [{"call": "c1", "id": "t1", "runs": 2}]
    assert said["attached"] == {"new": 2, "handed": 1, "parked": 0}
    assert (said["handed"], said["held_at_a_kill"], said["attached_after_a_kill"]) == (1, 1, 1)
    assert said["loss_to_attached_s"] == {"p50": 0.2, "p99": 0.2}
    assert said["console_attached"] == []
    handed_to_console = tally([*events, event("console", "attached", 12, why="new")], kills,
                              consoles={"console"})  # fmt: skip
    assert handed_to_console["console_attached"] == ["console: c1"]


async def test_an_app_that_never_holds_its_agent_is_named_with_its_log(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_bytes(encode(event("a", "held", 0, call=None)) + b"\n")
    processes = [
        Supervised(name=name, args=[], env={}, log=tmp_path / f"{name}.log") for name in "ab"
    ]
    with pytest.raises(click.ClickException) as refused:
        await wait_held(Ledgers(tmp_path), processes, within_s=0.3)
    assert refused.value.message == (
        f"b did not hold the agent within 0.3 s: see {tmp_path / 'b.log'}"
    )


def record(written: int) -> CallRecord:
    return CallRecord(
        call="call_1", agent="support-bot", org="", environment="production", room="r",
        worker="pinecall/up.1", state="sealed", written=written, last_seq=0, opened_at=T0,
    )  # fmt: skip


def log(*entries: tuple[int, int | None], state: str = "sealed") -> CallLog:
    """A log of ``(seq, counted)`` entries."""
    return CallLog(
        call="call_1",
        entries=[LoggedEntry(seq=q, kind="k", ts=T0, counted=c) for q, c in entries],
        state=state,  # type: ignore[arg-type]
    )


def test_a_log_verifies_when_sealed_gapless_and_holding_the_writers_entries_once_in_order() -> None:
    assert verify(record(2), log((1, None), (2, 0), (3, 1), (4, None))) is None
    assert "gap" in (verify(record(2), log((1, None), (3, 0), (4, 1))) or "")
    assert "once, in order" in (verify(record(2), log((1, None), (2, 1), (3, 0))) or "")
    assert "once, in order" in (verify(record(3), log((1, None), (2, 0), (3, 1))) or "")
    assert "not sealed" in (verify(record(1), log((1, None), (2, 0), state="ended")) or "")


def test_a_recording_verifies_when_it_is_the_logs_file_as_long_as_the_call_holding_the_lines() -> (
    None
):
    """What ``lab recordings`` read of a file against its ``call.recording`` entry, the call's
    length by its log and the lines its caller said: each way it can be wrong is named."""
    said = {"bytes": 100, "sha256": "ab"}
    found = {"error": None, "bytes": 100, "sha256": "ab", "channels": 2, "seconds": 20.4,
             "holds": 0.9}  # fmt: skip
    lines = ["greeting", "question"]
    assert recording_wrong("c", said, found, 20.0, lines) is None
    assert recording_wrong("c", said, found | {"holds": None}, 20.0, []) is None  # said nothing
    wrong = {
        "could not be read": (found | {"error": "HTTPStatusError(404)"}, 20.0),
        "not the bytes and SHA-256": (found | {"sha256": "cd"}, 20.0),
        "1 channels, not 2": (found | {"channels": 1}, 20.0),
        "lasts 20.4 s, its call 19.2 s": (found, 19.2),
        "lasts 20.4 s, its call None s": (found, None),  # the log has no end
        "holds 0.3 of the speech": (found | {"holds": 0.3}, 20.0),
    }
    for why, (read, seconds) in wrong.items():
        assert why in (recording_wrong("c", said, read, seconds, lines) or ""), why


def turns(*said: tuple[str, str]) -> CallLog:
    """A chat's log: ``("user", id)`` and ``("agent", id)`` turns, in that order."""
    kinds = {"user": ("turn.user", "message"), "agent": ("turn.agent", "reply_to")}
    return CallLog(
        call="call_1",
        entries=[
            LoggedEntry(seq=i, kind=kinds[who][0], ts=T0, counted=i - 1,
                        data={"text": "…", kinds[who][1]: message})
            for i, (who, message) in enumerate(said, start=1)
        ],
        state="sealed",
    )  # fmt: skip


def test_a_chats_log_holds_each_message_once_in_order_each_answered_once() -> None:
    chat = msgspec.structs.replace(record(4), channel="chat")
    visitor = ChatReport(visitor=0, environment="production", state="done",
                         sent=["m0", "m1"], answered=["m0", "m1"])  # fmt: skip
    good = turns(("user", "m0"), ("agent", "m0"), ("user", "m1"), ("agent", "m1"))
    assert verify_chat(chat, good, visitor) is None
    twice = turns(("user", "m0"), ("agent", "m0"), ("agent", "m0"), ("user", "m1"))
    assert "replies answer" in (verify_chat(chat, twice, visitor) or "")
    swapped = turns(("user", "m1"), ("agent", "m1"), ("user", "m0"), ("agent", "m0"))
    assert "the visitor sent" in (verify_chat(chat, swapped, visitor) or "")
    lost = turns(("user", "m0"), ("agent", "m0"))
    assert "the visitor sent" in (verify_chat(chat, lost, visitor) or "")
    early = turns(("agent", "m0"), ("user", "m0"), ("user", "m1"), ("agent", "m1"))
    assert "before its message" in (verify_chat(chat, early, visitor) or "")
    assert "not chat" in (verify_chat(record(4), good, visitor) or "")  # a voice call's record
    stopped = msgspec.structs.replace(visitor, state="stopped", answered=["m0"])
    assert verify_chat(chat, lost, stopped) is None  # the stop cut it off after m0's reply


@pytest.mark.parametrize(
    ("first_heard_s", "ended_s", "now_s", "silent"),
    [
        (4.0, 10.0, 20.0, False),
        (12.5, 20.0, 30.0, True),  # heard, but too late
        (None, None, 13.0, True),  # still ringing past 12 s
        (None, None, 5.0, False),  # ringing, not 12 s yet
        (None, 6.0, 30.0, False),  # hung up (stopped) before 12 s
    ],
)
def test_a_caller_is_silent_with_no_voice_12_s_from_arrival(
    first_heard_s: float | None, ended_s: float | None, now_s: float, silent: bool
) -> None:
    report = CallerReport(
        caller=0, kind="sip", environment="production", state="ringing", arrived_at=T0,
        first_heard_s=first_heard_s,
        ended_at=None if ended_s is None else T0 + dt.timedelta(seconds=ended_s),
    )  # fmt: skip
    assert is_silent(report, T0 + dt.timedelta(seconds=now_s)) is silent


def test_a_visitor_refused_before_any_room_is_not_silent() -> None:
    report = CallerReport(caller=1, kind="web", environment="sandbox", state="refused")
    assert not is_silent(report, T0 + dt.timedelta(hours=1))


def test_a_caller_stopped_before_its_call_opened_is_no_fault() -> None:
    """A visitor with its token, cut off by up's stop before an agent answered: the log holds no
    call of it, and that is the stop's doing. Any other unread log stays a problem."""
    stopped = CallerReport(
        caller=1, kind="web", environment="sandbox", state="ended", error="stopped"
    )
    assert stopped_unopened(stopped, 404)
    assert not stopped_unopened(stopped, 503)  # the log did not answer: a fault
    answered = CallerReport(
        caller=2, kind="web", environment="sandbox", state="ended", error="stopped",
        answered_by="pinecall-sandbox/up.1",
    )  # fmt: skip
    assert not stopped_unopened(answered, 404)  # an agent answered: its call must be on the log
    unanswered = CallerReport(caller=3, kind="sip", environment="production", state="ended")
    assert not stopped_unopened(unanswered, 404)  # not stopped: a call never opened is a fault


def test_the_outbound_line_says_which_not_reached_the_plan_meant(tmp_path: Path) -> None:
    """Of ``up``'s five numbers, the busy, never answered and failing ones are not reached by
    design (``up/outbound.py``'s ``PLAN``): the line says how many of the not reached those are,
    so one that should have been answered stands out."""
    run = Run(
        token="t", database_url="postgresql://x", nats_url="nats://x", namespace="upt",
        logs=tmp_path, sockets=tmp_path, livekit_keys={},
    )  # fmt: skip
    outbound = Outbound(run, {}, "http://dispatcher", agent="a", org="o", count=4, rate=1.0)
    outbound.placed = [
        Placed(environment="production", id="up-out-0", to=to, expect=expect, call=f"c{n}")
        for n, (to, expect) in enumerate(PLAN[:4])
    ]
    # the first answered number was not reached either: the plan did not mean that
    ended = {"c0": "not_reached", "c1": "not_reached", "c2": "completed", "c3": "not_reached"}
    counts = outbound.counts([], ended)
    assert (counts["not_reached"], counts["not_reached_planned"]) == (3, 2)
    said = "3 not reached (2 by the plan: busy, never answered, a failing trunk)"
    assert said in outbound_summary(counts)
    assert outbound.line(ended).endswith(said)  # the live table's line says it too
    # two calls, both to numbers that answer: the plan is not named
    outbound.placed = outbound.placed[:1] + outbound.placed[2:3]
    assert outbound.line({"c0": "not_reached", "c2": "completed"}).endswith(", 1 not reached")
