"""Acceptance 4: `lab vendors` serves the fakes, set by a config file and flags, until SIGTERM."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

import httpx
from click.testing import CliRunner

from pinecall_loadlab.commands import lab


def test_a_fault_must_name_a_vendor_and_a_kind() -> None:
    result = CliRunner().invoke(lab, ["vendors", "--fault", "openai:status:500"])
    assert result.exit_code == 2
    assert "is not VENDOR:KIND[:N]" in result.output


async def test_lab_vendors_serves_the_config_and_the_faults_until_sigterm(tmp_path: Path) -> None:
    config = tmp_path / "vendors.toml"
    config.write_text("[anthropic]\nfirst_s = 0.01\nchunk_s = 0.0\n")
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        "from pinecall_loadlab.commands import lab; lab()",
        "vendors",
        "--port",
        "0",
        "--config",
        str(config),
        "--fault",
        "anthropic:status:529",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    body = {
        "model": "claude-haiku-4-5",
        "max_tokens": 64,
        "stream": True,
        "messages": [{"role": "user", "content": "hi"}],
    }
    try:
        async with asyncio.timeout(60):
            assert proc.stdout is not None
            url = (await proc.stdout.readline()).decode().rsplit(" ", 1)[-1].strip()
            async with httpx.AsyncClient(base_url=url) as http:
                refused = await http.post("/v1/messages", json=body)
                answered = await http.post("/v1/messages", json=body)
            proc.send_signal(signal.SIGTERM)
            assert await proc.wait() == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert refused.status_code == 529
    assert refused.json()["error"]["type"] == "overloaded_error"
    assert answered.status_code == 200
    assert answered.text.rstrip().endswith('data: {"type": "message_stop"}')
