"""The README's main command, as a user runs it: the platform up, a table, a report, all stopped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def test_up_runs_the_platform_reports_and_stops_by_itself(
    tmp_path: Path, database_url: str, nats_url: str, nats_namespace: str
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINECALL_")}
    env |= {
        "PINECALL_STATE_DIR": str(tmp_path / "state"),
        "PINECALL_DATABASE_URL": database_url,
        "PINECALL_NATS_URL": nats_url,
        "PINECALL_NATS_NAMESPACE": nats_namespace,
    }
    report = tmp_path / "report.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pinecall_runtime",
            "up",
            "--duration",
            "2",
            "--every",
            "1",
            "--report",
            str(report),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "up: ready" in done.stdout
    result = json.loads(report.read_text())
    assert result["exit_codes"] == {"roster-0": 0, "roster-1": 0}
    assert result["restarts"] == {"roster-0": 0, "roster-1": 0}
    assert {f["fleet"] for f in result["fleets"]} == {"pinecall", "pinecall-sandbox"}
    # the platform is gone: nothing tells a CLI where it was
    assert not (tmp_path / "state" / "up.json").exists()
