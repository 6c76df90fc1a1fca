"""``pinecall-runtime up``: the whole platform on one machine, as it stands.

Postgres and NATS (the running ones, or embedded ones started in a temporary folder), every
service's migrations, an operator key and a fleet key per environment, the roster replicas; a live
table of the fleets while it runs; on stop (Ctrl-C, SIGTERM or ``--duration``) every process
drained and a JSON report. Later issues add the LiveKit stand-in, the vendors, the other services,
the workers and callers to the same command.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import click
import httpx
import msgspec

from pinecall_servicekit.operator import OperatorSettings, UpState, table
from pinecall_servicekit.platform import ensure_platform, free_port


def _cli(*args: str, env: dict[str, str]) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "pinecall_runtime", *args],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return out.stdout.strip()


def _wait_ready(url: str, proc: subprocess.Popen[bytes], deadline_s: float = 60) -> None:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise click.ClickException(f"{url}: the process exited with {proc.returncode}")
        try:
            if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)  # a server gives no other signal that it listens
    raise click.ClickException(f"{url} was not ready in {deadline_s:.0f} s")


def _fleet_table(url: str, key: str) -> tuple[str, Any]:
    snapshot = httpx.get(
        f"{url}/v1/ops/fleet", headers={"Authorization": f"Bearer {key}"}, timeout=2
    ).json()
    rows = [
        (
            f["fleet"],
            f.get("environment"),
            len(f["workers"]),
            f["totals"]["accepting"],
            f["totals"]["full"],
            f"{f['totals']['seats_free']}/{f['totals']['seats']}",
            f["totals"]["calls"],
        )
        for f in snapshot["fleets"]
    ]
    return table(
        ("fleet", "environment", "workers", "accepting", "full", "seats free", "calls"), rows
    ), snapshot


@click.command()
@click.option("--roster-replicas", default=2, show_default=True, type=click.IntRange(1, 8))
@click.option("--duration", type=float, default=None, help="Stop after this many seconds.")
@click.option(
    "--report",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write a JSON report here at the end.",
)
@click.option(
    "--every", type=float, default=5.0, show_default=True, help="Seconds between live tables."
)
def up(roster_replicas: int, duration: float | None, report: Path | None, every: float) -> None:
    """The whole platform on this machine, until Ctrl-C (or --duration)."""
    settings = OperatorSettings.from_env()
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    started = time.time()
    with ensure_platform(settings.database_url, settings.nats_url) as platform:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PINECALL_")}
        env |= {
            "PINECALL_DATABASE_URL": platform.database_url,
            "PINECALL_NATS_URL": platform.nats_url,
            "PINECALL_NATS_NAMESPACE": settings.nats_namespace,
            "PINECALL_STATE_DIR": settings.state_dir,
        }
        click.echo(
            f"postgres: {platform.database_url}"
            f"{' (embedded)' if platform.embedded_postgres else ''}"
        )
        click.echo(
            f"nats:     {platform.nats_url}{' (embedded)' if platform.embedded_nats else ''}"
        )
        click.echo(_cli("migrate", env=env))
        keys = {
            "operator": _cli("keys", "create", "--kind", "operator", "--name", "up", env=env),
            "fleet-production": _cli(
                "keys",
                "create",
                "--kind",
                "fleet",
                "--name",
                "up",
                "--environment",
                "production",
                env=env,
            ),
            "fleet-sandbox": _cli(
                "keys",
                "create",
                "--kind",
                "fleet",
                "--name",
                "up",
                "--environment",
                "sandbox",
                env=env,
            ),
        }
        procs: list[tuple[str, subprocess.Popen[bytes]]] = []
        rosters: list[str] = []
        try:
            for i in range(roster_replicas):
                port = free_port()
                url = f"http://127.0.0.1:{port}"
                proc = subprocess.Popen(
                    [sys.executable, "-m", "pinecall_runtime", "roster", "serve"],
                    env=env
                    | {
                        "PINECALL_PORT": str(port),
                        "PINECALL_LOG_FORMAT": "text",
                        "PINECALL_LOG_LEVEL": "WARNING",
                    },
                )
                procs.append((f"roster-{i}", proc))
                _wait_ready(url, proc)
                rosters.append(url)
                click.echo(f"roster-{i}: {url}")
            state = UpState(
                database_url=platform.database_url,
                nats_url=platform.nats_url,
                nats_namespace=settings.nats_namespace,
                operator_key=keys["operator"],
                roster_url=rosters[0],
            )
            state_dir = Path(settings.state_dir)
            state_dir.mkdir(parents=True, exist_ok=True)
            (state_dir / "up.json").write_bytes(msgspec.json.encode(state))
            (state_dir / "keys.json").write_text(json.dumps(keys, indent=2))
            click.echo(
                f"up: ready; the CLI reads {state_dir / 'up.json'} "
                f"(fleet keys in {state_dir / 'keys.json'})"
            )
            snapshot: Any = None
            while not stop.is_set():
                text, snapshot = _fleet_table(rosters[0], keys["operator"])
                click.echo(f"\n[{time.strftime('%H:%M:%S')}]\n{text}")
                if duration is not None and time.time() - started >= duration:
                    break
                stop.wait(every if duration is None else min(every, duration))
        finally:
            for _, proc in procs:
                proc.send_signal(signal.SIGTERM)
            codes = {name: proc.wait(30) for name, proc in procs}
            click.echo(f"up: stopped {', '.join(f'{n}={c}' for n, c in codes.items())}")
        if report is not None:
            report.write_text(
                json.dumps(
                    {
                        "seconds": round(time.time() - started, 1),
                        "platform": msgspec.to_builtins(platform),
                        "rosters": rosters,
                        "exit_codes": codes,
                        "fleets": snapshot["fleets"] if snapshot else [],
                    },
                    indent=2,
                )
            )
            click.echo(f"up: report in {report}")
