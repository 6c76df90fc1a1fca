"""``pinecall-runtime up``: the whole platform on one machine, as it stands.

Postgres and NATS (the running ones, or embedded ones started in a temporary folder), every
service's migrations, an operator key and a fleet key per environment, the roster replicas; a live
table of the fleets while it runs; on stop (Ctrl-C, SIGTERM or ``--duration``) every process
drained and a JSON report. Later issues add the LiveKit stand-in, the vendors, the other services,
the workers and callers to the same command.
"""

from __future__ import annotations

import contextlib
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

from pinecall_runtime.processes import run_cli, wait_ready
from pinecall_servicekit.operator import OperatorSettings, UpState, table
from pinecall_servicekit.platform import ensure_platform, free_port


def _fleet_table(urls: list[str], key: str) -> tuple[str, Any]:
    """The fleets as a table, from the first roster replica that answers."""
    for url in urls:
        try:
            snapshot = httpx.get(
                f"{url}/v1/ops/fleet", headers={"Authorization": f"Bearer {key}"}, timeout=2
            ).json()
        except httpx.HTTPError:
            continue
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
    return "no roster replica answered", None


class Supervised:
    """One service process of ``up``, in a process group of its own, started again if it dies."""

    def __init__(self, name: str, args: list[str], env: dict[str, str], url: str) -> None:
        self.name, self.args, self.env, self.url = name, args, env, url
        self.restarts = 0
        self.proc = self._spawn()

    def _spawn(self) -> subprocess.Popen[bytes]:
        # a group of its own: Granian's worker processes are stopped with their server
        return subprocess.Popen(self.args, env=self.env, start_new_session=True)

    def ensure(self) -> None:
        """Start the process again if it died (a SIGKILL, a crash); wait until it is ready."""
        code = self.proc.poll()
        if code is None:
            return
        click.echo(f"up: {self.name} exited with {code}: starting it again", err=True)
        self._signal(signal.SIGKILL)  # whatever is left of its group (an orphaned worker)
        self.restarts += 1
        self.proc = self._spawn()
        wait_ready(self.url, self.proc)

    def _signal(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)

    def stop(self, grace_s: float = 30) -> int | None:
        """SIGTERM its group (it drains), SIGKILL after ``grace_s``; its exit code."""
        self._signal(signal.SIGTERM)
        try:
            return self.proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            self._signal(signal.SIGKILL)
            return self.proc.wait(5)
        finally:
            self._signal(signal.SIGKILL)  # a worker process its server left behind


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
        click.echo(run_cli("migrate", env=env))
        keys = {
            "operator": run_cli("keys", "create", "--kind", "operator", "--name", "up", env=env)
        }
        for environment in ("production", "sandbox"):
            keys[f"fleet-{environment}"] = run_cli(
                "keys", "create", "--kind", "fleet", "--name", "up",
                "--environment", environment, env=env,
            )  # fmt: skip
        services: list[Supervised] = []
        codes: dict[str, int | None] = {}
        snapshot: Any = None
        state_dir = Path(settings.state_dir)
        try:
            for i in range(roster_replicas):
                port = free_port()
                service = Supervised(
                    f"roster-{i}",
                    [sys.executable, "-m", "pinecall_runtime", "roster", "serve"],
                    env
                    | {
                        "PINECALL_PORT": str(port),
                        "PINECALL_LOG_FORMAT": "text",
                        "PINECALL_LOG_LEVEL": "WARNING",
                    },
                    f"http://127.0.0.1:{port}",
                )
                services.append(service)
                wait_ready(service.url, service.proc)
                click.echo(f"{service.name}: {service.url}")
            rosters = [s.url for s in services]
            state = UpState(
                database_url=platform.database_url,
                nats_url=platform.nats_url,
                nats_namespace=settings.nats_namespace,
                operator_key=keys["operator"],
                roster_url=rosters[0],
            )
            state_dir.mkdir(parents=True, exist_ok=True)
            (state_dir / "up.json").write_bytes(msgspec.json.encode(state))
            (state_dir / "keys.json").write_text(json.dumps(keys, indent=2))
            click.echo(
                f"up: ready; the CLI reads {state_dir / 'up.json'} "
                f"(fleet keys in {state_dir / 'keys.json'})"
            )
            while not stop.is_set():
                for service in services:
                    service.ensure()
                text, latest = _fleet_table(rosters, keys["operator"])
                snapshot = latest or snapshot
                click.echo(f"\n[{time.strftime('%H:%M:%S')}]\n{text}")
                if duration is not None and time.time() - started >= duration:
                    break
                stop.wait(every if duration is None else min(every, duration))
        finally:
            codes = {service.name: service.stop() for service in services}
            # the platform is gone: a CLI must not read its address and keys any more
            for name in ("up.json", "keys.json"):
                (state_dir / name).unlink(missing_ok=True)
            click.echo(f"up: stopped {', '.join(f'{n}={c}' for n, c in codes.items())}")
        if report is not None:
            report.write_text(
                json.dumps(
                    {
                        "seconds": round(time.time() - started, 1),
                        "platform": msgspec.to_builtins(platform),
                        "rosters": [service.url for service in services],
                        "restarts": {service.name: service.restarts for service in services},
                        "exit_codes": codes,
                        "fleets": snapshot["fleets"] if snapshot else [],
                    },
                    indent=2,
                )
            )
            click.echo(f"up: report in {report}")
