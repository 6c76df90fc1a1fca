"""`lab livekit` serves the stand-in until SIGTERM."""

from __future__ import annotations

import asyncio
import signal
import sys

from click.testing import CliRunner
from livekit import api

from pinecall_loadlab.commands import lab


def test_keys_must_be_key_colon_secret() -> None:
    result = CliRunner().invoke(lab, ["livekit", "--keys", "nocolon"])
    assert result.exit_code == 2
    assert "is not KEY:SECRET" in result.output


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
