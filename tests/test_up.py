"""The README's main command, as a user runs it: the whole platform up, callers who speak, the
live table, a report whose every log was read back, everything stopped (issue 8, acceptance 1
and 2); the booking example's agent held by two app processes and a console per environment,
its tools asked by the model and answered by the apps, and, with app processes SIGKILLed, calls
handed between them (issue 16, "In the main job" and acceptance 5: ``lab run handover``). Each run
is ``pinecall-runtime up`` in a process of its own, on the running Postgres and NATS (it makes a
database and a namespace of its own), with a state folder of the test's own."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import msgspec
import pytest
from click.testing import CliRunner

from pinecall_contracts.base import encode
from pinecall_contracts.calls import CallLog, CallRecord, LoggedEntry
from pinecall_contracts.lab import AppEvent, CallerReport, ChatReport
from pinecall_runtime.plots import draw_up, up_series
from pinecall_runtime.up import up
from pinecall_runtime.up.apps import Kill, Ledgers, holders, tally, wait_held
from pinecall_runtime.up.command import holding, where_it_runs
from pinecall_runtime.up.recordings import verify as recording_wrong
from pinecall_runtime.up.report import stopped_unopened, summary, verify
from pinecall_runtime.up.supervise import Supervised
from pinecall_runtime.up.watch import is_silent
from pinecall_runtime.up.written import verify_chat
from pinecall_servicekit.calltrace import call_trace_id
from pinecall_servicekit.dburl import with_database
from pinecall_servicekit.platform import Endpoints
from pinecall_testkit.up import platform_env

# scheduled first (the testing plugin); 600 s, past `up`'s own 480 s (run_up, the handover run):
# at pytest-timeout's 300 s (pyproject.toml) its thread method ends the xdist worker with
# os._exit ("node down: Not properly terminated", CI) before the run's own timeout could fail
# the test with its output
pytestmark = [pytest.mark.long, pytest.mark.timeout(600)]

T0 = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)


def run_up(tmp_path: Path, platform: Endpoints, *args: str) -> tuple[dict[str, Any], str]:
    """``up ARGS --exit-when-done --report``: its report and its standard output, once it
    exited 0 (the assertion shows the end of its output and where its logs are otherwise)."""
    env = platform_env(platform) | {"PINECALL_STATE_DIR": str(tmp_path / "state")}
    report = tmp_path / "report.json"
    done = subprocess.run(
        [sys.executable, "-m", "pinecall_runtime", "up", *args, "--exit-when-done",
         "--every", "2", "--report", str(report)],
        env=env, capture_output=True, text=True, timeout=480, check=False,
    )  # fmt: skip
    assert done.returncode == 0, (
        f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}\nlogs: {tmp_path / 'state' / 'logs'}"
    )
    return json.loads(report.read_text()), done.stdout


def stopped_cleanly(result: dict[str, Any], tmp_path: Path) -> None:
    """Every process exited 0 on SIGTERM (the apps drained), none had to be started again, and
    nothing tells a CLI where the platform was; each process's log is where the output said."""
    assert set(result["exit_codes"].values()) == {0}, result["exit_codes"]
    assert set(result["restarts"].values()) == {0}, result["restarts"]
    for name in ("worker-production", "overflow-sandbox", "dispatcher", "livekit-sandbox",
                 "booking-production-1", "console-sandbox"):  # fmt: skip
        assert name in result["exit_codes"]
        assert (tmp_path / "state" / "logs" / f"{name}.log").stat().st_size > 0
    assert not (tmp_path / "state" / "up.json").exists()
    assert not (tmp_path / "state" / "keys.json").exists()


@pytest.mark.parametrize(
    ("admin", "server"),
    [
        ("postgresql://postgres:@/postgres?host=/tmp/pinecall-x", "socket /tmp/pinecall-x (port 5432)"),
        ("postgresql://postgres@127.0.0.1:5432/test", "127.0.0.1:5432"),
    ],
)  # fmt: skip
def test_the_banner_says_the_database_by_name_and_its_server_apart(admin: str, server: str) -> None:
    platform = Endpoints(
        database_url=admin, nats_url="nats://127.0.0.1:4222", embedded_postgres=True
    )
    run_database = with_database(admin, "pcup_0a1b2c3d")  # as own_platform makes it
    said = where_it_runs(platform, run_database, "up0a1b2c3d")
    assert said[0] == f"postgres: {server} (embedded), database pcup_0a1b2c3d for this run"
    assert said[1] == "nats:     nats://127.0.0.1:4222, namespace up0a1b2c3d"


def test_exit_when_done_needs_a_number_of_calls() -> None:
    result = CliRunner().invoke(up, ["--exit-when-done"])
    assert result.exit_code == 2
    assert "--exit-when-done needs --calls N or --chats N" in result.output


def test_a_second_up_on_a_state_dir_in_use_is_refused_before_it_starts_anything(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    with holding(state):
        result = CliRunner().invoke(up, ["--calls", "1"], env={"PINECALL_STATE_DIR": str(state)})
    assert result.exit_code == 1
    assert f"another up (pid {os.getpid()}) runs with the state dir {state}/" in result.output
    assert "PINECALL_STATE_DIR" in result.output
    assert not (state / "logs").exists()  # nothing of the first run was touched
    with holding(state):  # let go: the next run takes it
        pass


def test_a_plot_needs_the_report_it_draws() -> None:
    result = CliRunner().invoke(up, ["--calls", "1", "--plot", "up.png"])
    assert result.exit_code == 2
    assert "--plot draws the report: it needs --report FILE" in result.output


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


def test_a_report_in_a_folder_that_does_not_exist_is_refused_at_once(tmp_path: Path) -> None:
    where = tmp_path / "nowhere" / "up.json"
    result = CliRunner().invoke(up, ["--calls", "1", "--report", str(where)])
    assert result.exit_code == 2
    assert f"{where.parent} is not a folder" in result.output


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


def test_every_call_is_answered_by_an_agent_and_every_log_verifies(
    tmp_path: Path, platform_endpoints: Endpoints
) -> None:
    """Acceptance 1, with 4 calls: two phones and two visitors, one of each per environment; and
    two chat visitors (issue 17, "In the main job"), one per environment, whose written calls
    are answered through the chat service and, quiet, timed out by the reaper, each log
    verified as a voice call's; with ``--traces`` each call is one trace across every service,
    and ``--plot`` draws the report (issue 22, acceptance 4 and 6); every call recorded and each
    recording verified (issue 19, "In the main job")."""
    traces, plot = tmp_path / "traces.jsonl", tmp_path / "up.png"
    result, out = run_up(
        tmp_path, platform_endpoints, "--calls", "4", "--rate", "2", "--chats", "2",
        "--traces", str(traces), "--plot", str(plot),
    )  # fmt: skip
    one_trace_per_call(traces, result["callers"])
    assert plot.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    calls = result["calls"]
    assert calls["placed"] == 4
    assert calls["answered_by_agent"] == 4
    assert calls["silent"] == 0
    assert calls["by_kind"] == {"sip": 2, "web": 2}
    assert calls["by_environment"] == {"production": 2, "sandbox": 2}
    assert result["entries"]["logs"] == result["entries"]["logs_verified"] == 4
    assert result["entries"]["written"] >= 4 * 4  # started, the turns, ended, sealed
    assert result["first_audio_s"]["heard_by_the_caller"]["p50"] is not None
    assert result["first_audio_s"]["turns_on_the_log"]["p95"] is not None
    assert sum(result["offers_per_call"]["counts"].values()) == 4
    assert result["problems"] == []
    assert {c["outcome"] for c in result["callers"]} == {"caller_hangup"}
    # issue 19, "In the main job": every call an agent answered recorded to up's bucket, each
    # recording read through call-log's signed URL, decoded, as long as its call, and holding
    # the speech of its caller's lines on the caller's channel
    recorded = result["recordings"]
    assert (recorded["completed"], recorded["failed"]) == (calls["answered_by_agent"], 0)
    assert recorded["verified"] == recorded["calls"] == calls["answered_by_agent"]
    assert all(r["said"] and r["holds"] >= 0.5 for r in recorded["recordings"])
    assert all(abs(r["seconds"] - r["call_seconds"]) <= 1.0 for r in recorded["recordings"])
    assert "up: recordings: 4 completed, 0 failed, 4 of 4 calls answered verified" in out
    # the model asked the booking agent's tools (every second turn, the first included) and
    # the apps answered each, each handler run once by the apps' own count; nothing was handed
    # (no app process went) and the consoles were handed nothing
    tools, chat_tools = result["tools"], result["written"]["tools"]
    assert tools["asked"] >= 1
    assert tools["answered_by_the_app"] == tools["asked"]
    assert chat_tools["answered_by_the_app"] == chat_tools["asked"]
    # the apps ran every tool call once, the chats' too (they reach the app the same way)
    assert tools["runs"] == tools["asked"] + chat_tools["asked"]
    assert (tools["timed_out"], tools["unanswered"], tools["run_twice"]) == (0, 0, 0)
    apps = result["apps"]
    assert apps["processes"] == [
        "booking-production-1", "booking-production-2", "booking-sandbox-1", "booking-sandbox-2",
        "console-production", "console-sandbox",
    ]  # fmt: skip
    # issue 18, acceptance 6: up placed outbound calls, each request sent twice, none dialled
    # twice; every call placed came to an app as the callers' and the chats' did
    outbound = result["outbound"]
    assert outbound["placed"] >= 1
    assert (outbound["dialled_twice"], outbound["retried_same_call"]) == (0, outbound["placed"])
    assert outbound["ended"] == outbound["placed"]
    assert apps["attached"] == {"new": 4 + 2 + outbound["placed"], "handed": 0, "parked": 0}
    assert (apps["kills"], apps["handed"], apps["console_attached"]) == (0, 0, 0)
    assert sum(c["tools"] for c in result["callers"]) == tools["asked"]
    runs = tools["runs"]  # the table's tools line counts the chats' too
    assert f"tools: {runs} asked, {runs} answered by the app" in out
    # the callers' agent was defined in each environment before they rang (none is refused
    # unknown_agent), the live table printed, a row per environment, and the run said ready
    for environment in ("production", "sandbox"):
        assert (
            f"booking of org_up in {environment}, version 1, tools check_availability, "
            "book_table" in out
        )
    assert "up: ready" in out
    assert "calls 4/4 placed" in out
    assert "\nproduction " in out
    assert "\nsandbox " in out
    assert {f["fleet"] for f in result["fleets"]} == {"pinecall", "pinecall-sandbox"}
    # the chats: each opened, every message answered once, its log read back and verified (its
    # messages once each, in order, each with one reply), ended timeout by the reaper
    chats = result["written"]
    assert (chats["visitors"], chats["opened"], chats["answered"]) == (2, 2, 2)
    assert (chats["failed"], chats["stopped"], chats["timed_out"]) == (0, 0, 2)
    assert chats["messages"]["sent"] == chats["messages"]["answered"] == 2 * 3
    assert chats["logs"] == chats["logs_verified"] == 2
    assert (chats["waiting"], chats["let_go"]) == (0, 0)  # WhatsApp's, not run yet
    assert {c["environment"] for c in chats["chats"]} == {"production", "sandbox"}
    assert {c["outcome"] for c in chats["chats"]} == {"timeout"}
    assert chats["reply_start_s"]["p50"] is not None
    assert "chats: 2/2 visitors, 2 opened, 2 answered" in out
    assert "up: chats: 2 opened, 2 answered, 0 taken up, 2 timed out; 2 of 2 logs verified" in out
    for replica in ("chat", "chat-1"):
        assert replica in result["exit_codes"]
        assert (tmp_path / "state" / "logs" / f"{replica}.log").stat().st_size > 0
    stopped_cleanly(result, tmp_path)


def one_trace_per_call(traces: Path, callers: list[dict[str, Any]]) -> None:
    """Each answered caller's call is one trace, followed from its webhook to its seal: the
    trace of its environment and room holds spans of webhook-ingest (a webhook), the dispatcher
    (the offer), the worker (the job and its call-log requests) and call-log (its open, its
    entries and its seal, each in the trace the worker's request carried); and every span any
    service made for that call or room is in that one trace."""
    spans = [json.loads(line) for line in traces.read_text().splitlines()]
    assert spans, f"no span in {traces}"
    answered = [c for c in callers if c["room"] and c["answered_by"]]
    assert len(answered) == 4
    for caller in answered:
        trace = "0x" + call_trace_id(caller["environment"], caller["room"])
        mine = [s for s in spans if s["context"]["trace_id"] == trace]
        by_service: dict[str, set[str]] = {}
        for s in mine:
            by_service.setdefault(s["resource"]["attributes"]["service.name"], set()).add(s["name"])
        assert {"webhook-ingest", "dispatcher", "worker", "call-log"} <= set(by_service), by_service
        assert any(n.startswith("webhook ") for n in by_service["webhook-ingest"])
        assert "offer" in by_service["dispatcher"]
        assert "job answer" in by_service["worker"]
        call = next(s["attributes"]["pinecall.call"] for s in mine if s["name"] == "offer")
        assert {f"POST /v1/calls/{call}/seal", f"POST /v1/calls/{call}/entries"} <= {
            f"{s['attributes'].get('http.method')} {s['attributes'].get('http.target')}"
            for s in mine
            if s["resource"]["attributes"]["service.name"] == "call-log"
        }, by_service["call-log"]
        named = [
            s for s in spans
            if s["attributes"].get("pinecall.call") == call
            or s["attributes"].get("pinecall.room") == caller["room"]
        ]  # fmt: skip
        assert {s["context"]["trace_id"] for s in named} == {trace}, [
            (s["name"], s["resource"]["attributes"]["service.name"]) for s in named
            if s["context"]["trace_id"] != trace
        ]  # fmt: skip


def test_callers_beyond_the_seats_hear_the_overflow_and_are_called_back(
    tmp_path: Path, platform_endpoints: Endpoints
) -> None:
    """Acceptance 2: one seat per environment and three callers each, all ringing before the
    first call ends; the phones beyond the seat hear the overflow's sentence and get a call
    back on the agent's log; the visitors beyond it are refused at the endpoint, whose page
    asks a call back; nobody is silent, and every log verifies. A real Prometheus scraped the
    run (issue 22, acceptance 2): "fleet full" fired."""
    result, out = run_up(
        tmp_path, platform_endpoints, "--seats", "1", "--calls", "6", "--rate", "2", "--prometheus",
        "--outbound", "0",  # the seats are the callers' to race for: no outbound call takes one
    )  # fmt: skip
    calls = result["calls"]
    assert calls["placed"] == 6
    assert calls["answered_by_agent"] == 2  # the one seat of each environment
    beyond = calls["answered_by_overflow"] + sum(calls["refused_at_the_endpoint"].values())
    assert beyond == 4
    assert calls["answered_by_overflow"] >= 1
    assert calls["heard_the_overflow"] == calls["answered_by_overflow"]
    assert set(calls["refused_at_the_endpoint"]) <= {"fleet_full"}
    assert calls["silent"] == 0
    callbacks = result["callbacks"]
    assert callbacks["on_the_agent_log"] == callbacks["phones_overflowed"]
    assert callbacks["visitors_refused_called_back"] == sum(
        calls["refused_at_the_endpoint"].values()
    )
    # issue 18, acceptance 6: the phones' call backs dialled once a seat freed (the stand-ins'
    # default callee answers and hangs up), a visitor's (a contact, no number) given up
    requested = callbacks["phones_overflowed"] + callbacks["visitors_refused_called_back"]
    assert callbacks["requested"] == requested
    assert callbacks["dialled"] >= callbacks["phones_overflowed"] >= 1
    assert callbacks["answered"] == callbacks["phones_overflowed"]
    assert callbacks["given_up"] == callbacks["visitors_refused_called_back"]
    assert (callbacks["dialled_twice"], callbacks["waiting"]) == (0, 0)
    assert "up: call backs: " in out
    overflowed = [c for c in result["callers"] if (c["answered_by"] or "").endswith("/overflow")]
    assert {c["outcome"] for c in overflowed} == {"overflow"}
    assert {c["ended_by"] for c in overflowed} == {"far_end"}  # the sentence, then the room went
    assert result["entries"]["logs"] == result["entries"]["logs_verified"] == 4
    assert result["problems"] == []
    fired = {a["title"] for a in result["alerts_fired"]}
    assert "fleet full" in fired, out[-2000:]
    assert "up: alerts fired: " in out
    stopped_cleanly(result, tmp_path)


def test_lab_run_handover_hands_the_calls_of_killed_app_processes_and_runs_no_tool_twice(
    platform_endpoints: Endpoints,
) -> None:
    """Acceptance 5 (and up --app-restarts): six calls, every turn asking a tool, an app process
    SIGKILLed every 2 s and started again. The calls the killed processes held are attached to
    the other process; every tool call gets one result; no handler ran twice by the apps' own
    count; no caller is silent."""
    done = subprocess.run(
        [sys.executable, "-m", "pinecall_runtime", "lab", "run", "handover", "--json",
         "--calls", "6", "--rate", "2", "--app-restarts", "2"],
        env=platform_env(platform_endpoints), capture_output=True, text=True, timeout=480,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    found = json.loads(done.stdout)
    assert (found["calls"], found["answered_by_agent"], found["silent"]) == (6, 6, 0)
    assert found["tools_asked"] >= 1
    assert found["tools_answered_by_the_app"] + found["tools_timed_out"] == found["tools_asked"]
    assert found["tools_run_twice"] == 0
    assert found["kills"] >= 1
    assert found["handed"] >= 1  # a kill of the process holding the most calls hands them on
    assert found["loss_to_attached_s"]["p50"] is not None
    assert (found["problems"], found["up_exit"], found["state_dir"]) == ([], 0, None)


def test_app_restarts_must_be_a_second_or_more() -> None:
    result = CliRunner().invoke(up, ["--calls", "1", "--app-restarts", "0.5"])
    assert result.exit_code == 2
    assert "--app-restarts" in result.output


def test_a_tool_share_past_1_is_refused() -> None:
    result = CliRunner().invoke(up, ["--calls", "1", "--tool-share", "1.5"])
    assert result.exit_code == 2
    assert "--tool-share" in result.output


def test_an_unknown_setting_is_refused_with_exit_78_before_anything_starts(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        up, ["--calls", "1"], env={"PINECALL_FOO": "1", "PINECALL_STATE_DIR": str(tmp_path)}
    )
    assert result.exit_code == 78
    assert "unknown setting(s): PINECALL_FOO" in result.output
    assert not (tmp_path / "up.json").exists()
