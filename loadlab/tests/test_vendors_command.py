"""Acceptance 4: `lab vendors` serves the fakes, set by a config file and flags, until SIGTERM."""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from pinecall_loadlab.commands import lab, vendors_config
from pinecall_loadlab.vendors.config import DEFAULT_PORT


def test_a_fault_must_name_a_vendor_and_a_kind() -> None:
    result = CliRunner().invoke(lab, ["vendors", "--fault", "openai:status:500"])
    assert result.exit_code == 2
    assert "is not VENDOR:KIND[:N]" in result.output


async def test_lab_vendors_serves_the_config_and_the_flags_until_sigterm(tmp_path: Path) -> None:
    """The file's fault comes back first, then the flag's (appended to the file's plan); the
    flag's time to first token overrides the file's 0 (seen as a lower bound on the wait, which
    no machine can undercut)."""
    config = tmp_path / "vendors.toml"
    config.write_text(
        '[anthropic]\nfirst_s = 0.0\nchunk_s = 0.0\nfaults = [{ kind = "status", status = 503 }]\n'
    )
    ttft = 0.5
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
        "--llm-ttft",
        str(ttft),
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
                from_file = await http.post("/v1/messages", json=body)
                from_flag = await http.post("/v1/messages", json=body)
                first_delta: float | None = None
                sent = time.monotonic()
                async with http.stream("POST", "/v1/messages", json=body) as answer:
                    lines = []
                    async for line in answer.aiter_lines():
                        if "content_block_delta" in line and first_delta is None:
                            first_delta = time.monotonic() - sent
                        lines.append(line)
            proc.send_signal(signal.SIGTERM)
            assert await proc.wait() == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert from_file.status_code == 503
    assert from_file.json()["error"]["type"] == "api_error"
    assert from_flag.status_code == 529
    assert from_flag.json()["error"]["type"] == "overloaded_error"
    assert answer.status_code == 200
    assert [line for line in lines if line][-1] == 'data: {"type": "message_stop"}'
    assert first_delta is not None
    assert first_delta >= ttft


def test_a_config_file_without_a_port_listens_on_the_documented_default(tmp_path: Path) -> None:
    config = tmp_path / "vendors.toml"
    config.write_text("[anthropic]\nfirst_s = 1.2\n")
    served = vendors_config(str(config), "127.0.0.1", None, {}, [])
    assert served.port == DEFAULT_PORT == 7890
    assert served.anthropic.first_s == 1.2
    assert vendors_config(None, "127.0.0.1", None, {}, []).port == DEFAULT_PORT
    assert vendors_config(str(config), "127.0.0.1", 0, {}, []).port == 0
    help_text = CliRunner().invoke(lab, ["vendors", "--help"]).output
    assert f"else {DEFAULT_PORT}" in help_text
    readme = (Path(__file__).parents[1] / "README.md").read_text()
    assert f"[--port {DEFAULT_PORT}]" in readme


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("[anthropic]\nfrist_s = 1.2\n", "frist_s"),
        ("prot = 9000\n", "prot"),
        ("[cartesia]\nfirst_s = -1.0\n", "first_s"),
        ('[deepgram]\nfaults = [{ kind = "explode" }]\n', "kind"),
        ("[anthropic\n", "table declaration"),
    ],
)
def test_a_bad_config_file_is_a_usage_error_naming_the_key(
    tmp_path: Path, text: str, named: str
) -> None:
    config = tmp_path / "vendors.toml"
    config.write_text(text)
    result = CliRunner().invoke(lab, ["vendors", "--config", str(config)])
    assert result.exit_code == 2, result.output
    assert "Invalid value for --config" in result.output
    assert named in result.output
    assert "Traceback" not in result.output


def test_a_negative_latency_flag_is_a_usage_error() -> None:
    result = CliRunner().invoke(lab, ["vendors", "--llm-ttft", "-1"])
    assert result.exit_code == 2
    assert "--llm-ttft" in result.output


def test_the_tool_share_flag_sets_the_models_share_and_is_refused_past_1() -> None:
    served = vendors_config(None, "127.0.0.1", 0, {("anthropic", "tool_share"): 0.25}, [])
    assert served.anthropic.tool_share == 0.25
    result = CliRunner().invoke(lab, ["vendors", "--tool-share", "1.5"])
    assert result.exit_code == 2
    assert "--tool-share" in result.output
