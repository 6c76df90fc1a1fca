"""``lab app``: the booking example run as ``pinecall start`` runs it, its ledger saying each
call attached and detached and each tool handler entered; the console beside it holds the agent
and is handed nothing (issue 16, "In the main job"). Against a real call-log replica."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import msgspec
import yaml
from click.testing import CliRunner

from pinecall_contracts.lab import AppEvent
from pinecall_loadlab.commands import lab
from pinecall_testkit import appsocket
from pinecall_testkit.appsocket import ask, define, open_call, service
from pinecall_testkit.call_log import make_keys

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "booking"


def ledger(path: Path) -> list[AppEvent]:
    return [msgspec.json.decode(line, type=AppEvent) for line in path.read_bytes().splitlines()]


async def test_the_ledger_says_what_the_app_did_and_the_console_is_handed_nothing(
    database_url: str, nats_url: str, nats_namespace: str, tmp_path: Path
) -> None:
    keys = await make_keys(database_url)
    serve = appsocket.serving(appsocket.call_log_settings(database_url, nats_url, nats_namespace))
    async with serve() as replica:
        await define(replica, keys, body=yaml.safe_load((EXAMPLE / "booking.yaml").read_text()))
        hub = service(replica).hub
        env = os.environ | {
            "BOOKING_URL": replica.url, "BOOKING_KEY": keys.app, "BOOKING_ORG": "org_acme",
            "BOOKING_INSTANCE": "booking-1", "CONSOLE_URL": replica.url, "CONSOLE_KEY": keys.app,
            "CONSOLE_ORG": "org_acme", "CONSOLE_AGENT": "booking", "CONSOLE_INSTANCE": "console",
        }  # fmt: skip
        lab_app = [sys.executable, "-m", "pinecall_runtime", "lab", "app"]
        processes = [
            await asyncio.create_subprocess_exec(
                *lab_app, "app:app", "--app-dir", str(EXAMPLE),
                "--ledger", str(tmp_path / "booking-1.jsonl"), env=env,
                stderr=asyncio.subprocess.DEVNULL,
            ),
            await asyncio.create_subprocess_exec(
                *lab_app, "pinecall_loadlab.apps.console:app",
                "--ledger", str(tmp_path / "console.jsonl"), env=env,
                stderr=asyncio.subprocess.DEVNULL,
            ),
        ]  # fmt: skip
        try:
            await hub.changes.wait_for(
                lambda: sum("booking" in s.agents for s in hub.sockets.values()) == 2, 30
            )
            await open_call(replica, keys, agent="booking")
            answer = await ask(
                replica, keys, id="tc_1", name="check_availability",
                arguments={"time": "19:00", "party": 2},
            )  # fmt: skip
            assert answer["result"]["available"] is True
            for process in processes:
                process.send_signal(signal.SIGTERM)
            async with asyncio.timeout(30):  # a failure bound, never a pace
                codes = [await p.wait() for p in processes]
        finally:
            for process in processes:
                if process.returncode is None:
                    process.kill()
                    await process.wait()
    assert codes == [0, 0]
    booking = ledger(tmp_path / "booking-1.jsonl")
    assert [(e.what, e.call, e.why, e.tool, e.id) for e in booking] == [
        ("held", None, None, None, None),
        ("attached", "call_1", "new", None, None),
        ("tool", "call_1", None, "check_availability", "tc_1"),
        ("detached", "call_1", "drained", None, None),
    ]
    assert {e.instance for e in booking} == {"booking-1"}
    assert [e.what for e in ledger(tmp_path / "console.jsonl")] == ["held"]


def test_a_ledger_in_a_folder_that_does_not_exist_is_refused(tmp_path: Path) -> None:
    where = tmp_path / "nowhere" / "app.jsonl"
    result = CliRunner().invoke(lab, ["app", "app:app", "--ledger", str(where)])
    assert result.exit_code == 2
    assert f"{where.parent} is not a folder" in result.output


def test_an_app_that_cannot_be_imported_is_a_usage_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        lab, ["app", "no_such_module:app", "--ledger", str(tmp_path / "app.jsonl")]
    )
    assert result.exit_code == 2
    assert "cannot import no_such_module" in result.output
