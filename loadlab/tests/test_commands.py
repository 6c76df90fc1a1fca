"""`lab livekit` serves the stand-in until SIGTERM."""

from __future__ import annotations

import asyncio
import signal
import sys

import pytest
from click.testing import CliRunner
from livekit import api

from pinecall_loadlab.commands import lab

# scheduled first (the testing plugin); 420 s, past each `lab run`'s own 300 s and its process's
# start and kill: at pytest-timeout's 300 s (pyproject.toml) its thread method would end the
# xdist worker with os._exit before asyncio.timeout could fail the test with the run's log
pytestmark = [pytest.mark.long, pytest.mark.timeout(420)]


def test_keys_must_be_key_colon_secret() -> None:
    result = CliRunner().invoke(lab, ["livekit", "--keys", "nocolon"])
    assert result.exit_code == 2
    assert "is not KEY:SECRET" in result.output


@pytest.mark.parametrize(
    ("flag", "value", "says"),
    [
        ("--offer-deadline", "-1", "--offer-deadline"),
        ("--offer-deadline", "0", "--offer-deadline"),
        ("--offer-deadline", "nan", "--offer-deadline"),
        ("--offer-deadline", "inf", "--offer-deadline"),
        ("--target-load", "nan", "--target-load"),
        ("--target-load", "1.5", "--target-load"),
        ("--port", "99999", "--port"),
        ("--webhook", "notaurl", "is not an http(s) URL"),
        ("--webhook", "ftp://x/hook", "is not an http(s) URL"),
    ],
)
def test_flags_that_cannot_be_are_refused_before_it_starts(
    flag: str, value: str, says: str
) -> None:
    """A stand-in told a negative offer deadline or a webhook that is no URL would start and
    then offer nothing or post nowhere: click refuses it (exit 2, naming the flag)."""
    result = CliRunner().invoke(lab, ["livekit", flag, value])
    assert result.exit_code == 2, result.output
    assert says in result.output


@pytest.mark.parametrize(
    ("flag", "value"),
    [("--calls", "0"), ("--rate", "0"), ("--tool-share", "1.5"), ("--app-restarts", "0.5")],
)
def test_a_handover_that_cannot_be_is_refused_before_it_starts(flag: str, value: str) -> None:
    result = CliRunner().invoke(lab, ["run", "handover", flag, value])
    assert result.exit_code == 2
    assert flag in result.output


async def test_lab_livekit_serves_until_sigterm() -> None:
    key, secret = "cli-key", "cli-secret-of-at-least-32-characters"
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        "from pinecall_loadlab.commands import lab; lab()",
        "livekit",
        "--port",
        "0",
        "--keys",
        f"{key}:{secret}",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        async with asyncio.timeout(60):
            assert proc.stdout is not None
            line = (await proc.stdout.readline()).decode()
            url = line.rsplit(" ", 1)[-1].strip()
            async with api.LiveKitAPI(url, key, secret) as lk:
                room = await lk.room.create_room(api.CreateRoomRequest(name="r"))
            assert room.name == "r"
            proc.send_signal(signal.SIGTERM)
            assert await proc.wait() == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_lab_run_capacity_prints_both_modes_as_json(platform_endpoints, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """`pinecall-runtime lab run capacity --json`, as anyone runs it (issue 7, acceptance 9),
    with the test's shorter numbers; its own database and namespace are removed after."""
    import json
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("PINECALL_")}
    env |= {
        "PINECALL_DATABASE_URL": platform_endpoints.database_url,
        "PINECALL_NATS_URL": platform_endpoints.nats_url,
    }
    log = (tmp_path / "stderr").open("wb")  # its log, said when the run fails
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "pinecall_runtime",
        "lab",
        "run",
        "capacity",
        "--json",
        "--interval",
        "0",
        "--offer-deadline",
        "3",
        "--reoffer",
        "4",
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=log,
    )
    try:
        async with asyncio.timeout(300):
            out, _ = await proc.communicate()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        log.close()
    assert proc.returncode == 0, (tmp_path / "stderr").read_text()[-6000:]
    result = json.loads(out)
    rows = {
        m["mode"]: (m["placed"], m["answered_by_agent"], m["answered_by_overflow"], m["silent"])
        for m in result["modes"]
    }
    assert rows == {"runtime_choosing": (18, 16, 2, 0), "livekit_choosing": (18, 12, 0, 6)}


async def test_lab_run_death_a_killed_workers_callers_hear_the_sentence_as_json(
    platform_endpoints,  # type: ignore[no-untyped-def]
) -> None:
    """`pinecall-runtime lab run death --json` (issue 8, acceptance 3): real worker processes,
    the one holding three calls SIGKILLed. The runtime choosing: each of its callers hears the
    sentence from the survivor; each call ends drained, gets a call back, its log goes on from
    the dead worker's count with no gap (ended, the sentence, sealed, in that order) and its
    room is deleted. LiveKit choosing: nobody does anything, every caller is left silent. The
    seconds are reported, not asserted. LiveKit's connection timeout is shortened to 1 s."""
    import json
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("PINECALL_")}
    env |= {
        "PINECALL_DATABASE_URL": platform_endpoints.database_url,
        "PINECALL_NATS_URL": platform_endpoints.nats_url,
    }
    args = ["--json", "--offer-deadline", "3", "--reoffer", "4", "--connection-timeout", "1"]
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "pinecall_runtime",
        "lab",
        "run",
        "death",
        *args,
        "--quiet",
        "3",
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        async with asyncio.timeout(300):
            out, _ = await proc.communicate()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0
    modes = {m["mode"]: m for m in json.loads(out)["modes"]}
    runtime, livekit = modes["runtime_choosing"], modes["livekit_choosing"]
    counts = ("placed", "answered_by_agent", "lost", "sentenced", "silent", "gaps")
    assert tuple(runtime[k] for k in counts) == (4, 4, 3, 3, 0, 0)
    assert tuple(livekit[k] for k in counts) == (3, 3, 3, 0, 3, 0)
    assert len(runtime["webhook_to_sentence_s"]) == 3
    for call in runtime["calls"]:
        assert call["sentence_by"] not in (None, call["answered_by"])  # another worker's job
        assert (call["ended"], call["callback"], call["sealed"], call["room_deleted"]) == (
            "drained",
            True,
            True,
            True,
        )
        assert call["written"] > 0  # the dead worker's writer had written the turn
        assert call["sentence_after"] == call["written"]  # the sentence follows on from it
        assert call["after_loss"] == ["call.ended", "call.sentence", "call.sealed"]
    for call in livekit["calls"]:
        assert call["lost_to_webhook_s"] is not None  # LiveKit said the agent was lost...
        assert (call["ended"], call["callback"], call["sentence_by"]) == (None, False, None)
        assert call["after_loss"] == []  # ...and nothing happened: the call is open, silent
