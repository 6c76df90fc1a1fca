"""The README's main command, as a user runs it: the whole platform up, callers who speak, the
live table, a report whose every log was read back, everything stopped (issue 8, acceptance 1
and 2); the booking example's agent held by two app processes and a console per environment,
its tools asked by the model and answered by the apps, and, with app processes SIGKILLed, calls
handed between them (issue 16, "In the main job" and acceptance 5: ``lab run handover``). Each run
is ``pinecall-runtime up`` in a process of its own, on the running Postgres and NATS (it makes a
database and a namespace of its own), with a state folder of the test's own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from pinecall_runtime.up import up
from pinecall_runtime.up.command import holding, where_it_runs
from pinecall_servicekit.calltrace import call_trace_id
from pinecall_servicekit.dburl import with_database
from pinecall_servicekit.platform import Endpoints
from pinecall_testkit.up import platform_env

# scheduled first (the testing plugin); 600 s, past `up`'s own 480 s (run_up, the handover run):
# at pytest-timeout's 300 s (pyproject.toml) its thread method ends the xdist worker with
# os._exit ("node down: Not properly terminated", CI) before the run's own timeout could fail
# the test with its output
pytestmark = [pytest.mark.long, pytest.mark.timeout(600)]


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


def test_a_report_in_a_folder_that_does_not_exist_is_refused_at_once(tmp_path: Path) -> None:
    where = tmp_path / "nowhere" / "up.json"
    result = CliRunner().invoke(up, ["--calls", "1", "--report", str(where)])
    assert result.exit_code == 2
    assert f"{where.parent} is not a folder" in result.output


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
    assert outbound["not_reached"] == outbound["not_reached_planned"]  # each answered number was
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
        assert f"POST /v1/calls/{call}/seal" in {
            f"{s['attributes'].get('http.method')} {s['attributes'].get('http.target')}"
            for s in mine
            if s["resource"]["attributes"]["service.name"] == "call-log"
        }, by_service["call-log"]
        # its entries went with its worker's other calls' (the relay, issue 20): call-log wrote
        # each of its batches in a span of the call's trace, linked to the worker's request
        written = [
            s for s in mine
            if s["resource"]["attributes"]["service.name"] == "call-log"
            and s["name"] == "write entries"
        ]  # fmt: skip
        assert written, by_service["call-log"]
        assert {s["attributes"]["pinecall.call"] for s in written} == {call}
        assert all(s["attributes"]["pinecall.batch.status"] == 200 for s in written)
        assert all(s["links"] for s in written)
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
