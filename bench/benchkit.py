"""What the roster benchmark stands on: the platform of one run (its database, namespace, keys and
replicas) and CPU accounting from Linux's /proc. Not a test, never imported by production code."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import resource
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import nats
import psycopg

if TYPE_CHECKING:
    import psutil

from pinecall_servicekit.dburl import with_database
from pinecall_servicekit.platform import Endpoints, free_port

FLEET = "pinecall"
"""The production fleet (the roster's default fleets row ``pinecall=production``)."""
SEATS = 8
"""Seats of every simulated worker (``max_jobs``)."""
REFERENCE_RATE = 200.0
"""Heartbeats per second of 1 000 workers at one heartbeat each 5 s."""
START = int(time.time())
"""The ``<start>`` of every simulated worker's name."""


def bounded(kind: type[int] | type[float], low: float, high: float) -> Callable[[str], float]:
    """An argparse ``type``: ``kind`` of the text, between ``low`` and ``high`` (NaN and the
    infinities out), else argparse's usage error naming the option."""

    def convert(text: str) -> float:
        value = kind(text)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text} is not in [{low:g}, {high:g}]")
        return value

    return convert


def log(message: str) -> None:
    """Progress, on stderr (stdout holds only the results)."""
    print(f"[bench] {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- CPU accounting (Linux /proc)


def tree_cpu_s(root: int) -> float | None:
    """User + system CPU seconds of process ``root`` and its descendants (None without /proc)."""
    ticks = os.sysconf("SC_CLK_TCK")
    stats: dict[int, tuple[int, float]] = {}
    try:
        entries = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return None
    for entry in entries:
        try:
            text = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue  # exited meanwhile
        fields = text.rsplit(")", 1)[1].split()
        # after "pid (comm)": state ppid ... utime(14th) stime(15th) of the full line
        stats[int(entry)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / ticks)
    if root not in stats:
        return None
    total, stack = 0.0, [root]
    while stack:
        pid = stack.pop()
        total += stats[pid][1]
        stack.extend(child for child, (ppid, _) in stats.items() if ppid == pid)
    return total


def machine_busy_s() -> float | None:
    """CPU seconds every core of the machine spent busy since boot (``/proc/stat``)."""
    try:
        with open("/proc/stat") as stat:
            fields = stat.readline().split()
    except OSError:
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in fields[1:9])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def self_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# ---------------------------------------------------------------------------- the platform


@dataclass
class Bench:
    """The run's own database, namespace, keys and replicas."""

    platform: Endpoints
    workdir: Path
    namespace: str
    database: str
    database_url: str
    env: dict[str, str]
    operator_key: str = ""
    service_key: str = ""
    fleet_key: str = ""
    app_key: str = ""
    """Made by a benchmark that needs one (``keys create --kind app``)."""
    replicas: dict[str, tuple[str, subprocess.Popen[bytes]]] = field(default_factory=dict)
    exit_codes: dict[str, int | None] = field(default_factory=dict)

    def cli(self, *args: str) -> str:
        out = subprocess.run(
            [sys.executable, "-m", "pinecall_runtime", *args],
            env=self.env,
            check=True,
            capture_output=True,
            text=True,
            timeout=120,
        )
        return out.stdout.strip()

    def start_replica(self, name: str, service: str = "roster") -> str:
        """Start ``<service> serve`` (one Granian worker) as replica ``name``; its URL once
        ready."""
        return self.start(name, service, "serve", "--workers", "1")

    def start(
        self,
        name: str,
        *command: str,
        env: dict[str, str] | None = None,
        port: int | None = None,
        ready: str = "/readyz",
    ) -> str:
        """Start ``pinecall-runtime COMMAND…`` (a server) as ``name`` on ``port`` (free when not
        given; ``PINECALL_PORT``), its output in ``<workdir>/<name>.log``; its URL once ``ready``
        answers 200 (any answer when ``ready`` is empty)."""
        port = port or free_port()
        url = f"http://127.0.0.1:{port}"
        logfile = (self.workdir / f"{name}.log").open("wb")
        proc = subprocess.Popen(
            [sys.executable, "-m", "pinecall_runtime", *command],
            env=self.env
            | {
                "PINECALL_PORT": str(port),
                "PINECALL_LOG_FORMAT": "text",
                "PINECALL_LOG_LEVEL": "WARNING",
            }
            | (env or {}),
            stdout=logfile,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a group of its own: Granian's worker goes with its server
        )
        logfile.close()  # the child holds its own descriptor
        self.replicas[name] = (url, proc)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited with {proc.returncode}: {self.tail(name)}")
            try:
                status = httpx.get(f"{url}{ready}", timeout=1).status_code
                if status == 200 or not ready:
                    log(f"{name}: {url} ready (pid {proc.pid})")
                    return url
            except httpx.HTTPError:
                pass
            time.sleep(0.1)  # a server gives no other signal that it listens
        raise RuntimeError(f"{name} at {url} was not ready in 60 s: {self.tail(name)}")

    def start_dispatcher(self, call_log_url: str) -> str:
        """Start the dispatcher (``dispatcher serve``, the service key, LiveKit keys of no real
        LiveKit) as ``dispatcher``, for a written call's admission (``POST /v1/written-calls``:
        the agent known, the org's quota); its URL once ready."""
        return self.start(
            "dispatcher", "dispatcher", "serve",
            env={"PINECALL_SERVICE_KEY": self.service_key, "PINECALL_CALL_LOG_URL": call_log_url,
                 "PINECALL_LIVEKIT_KEYS": "production=bench-key:bench-secret-0123456789abcdef"},
        )  # fmt: skip

    def tail(self, name: str) -> str:
        path = self.workdir / f"{name}.log"
        return path.read_text(errors="replace")[-2000:] if path.exists() else ""

    def stop_replicas(self) -> None:
        """SIGTERM every service started, wait up to 30 s each, SIGKILL one that is still up."""
        for _, proc in self.replicas.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for name, (_, proc) in self.replicas.items():
            try:
                self.exit_codes[name] = proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                self.exit_codes[name] = proc.wait(10)
                log(f"{name} did not stop on SIGTERM in 30 s: killed; its log: {self.tail(name)}")
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)  # whatever its group left behind
        log(f"replicas stopped: {self.exit_codes}")


@contextlib.contextmanager
def bench_platform(platform: Endpoints) -> Iterator[Bench]:
    """A database and a NATS namespace of the run's own, removed when the context ends."""
    token = secrets.token_hex(4)
    namespace = f"bench{token}"
    database = f"pcbench_{token}"
    admin = platform.database_url
    database_url = with_database(admin, database)
    with tempfile.TemporaryDirectory(prefix="pinecall-bench-") as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PINECALL_")}
        env |= {
            "PINECALL_DATABASE_URL": database_url,
            "PINECALL_NATS_URL": platform.nats_url,
            "PINECALL_NATS_NAMESPACE": namespace,
            "PINECALL_STATE_DIR": tmp,  # never read a developer's .state/up.json
        }
        bench = Bench(
            platform=platform,
            workdir=Path(tmp),
            namespace=namespace,
            database=database,
            database_url=database_url,
            env=env,
        )
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{database}"')
        log(f"database {database} created; NATS namespace {namespace}")
        try:
            bench.cli("migrate")
            bench.operator_key = bench.cli(
                "keys", "create", "--kind", "operator", "--name", "bench"
            )
            bench.service_key = bench.cli("keys", "create", "--kind", "service", "--name", "bench")
            bench.fleet_key = bench.cli(
                "keys",
                "create",
                "--kind",
                "fleet",
                "--name",
                "bench",
                "--environment",
                "production",
            )
            yield bench
        finally:
            try:
                bench.stop_replicas()
            finally:
                with psycopg.connect(admin, autocommit=True) as conn:
                    conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
                log(f"database {database} dropped")
                asyncio.run(delete_namespace(platform.nats_url, namespace))


async def delete_namespace(nats_url: str, namespace: str) -> None:
    """Delete the run's JetStream streams: its namespace's (``<namespace>_…``: the LiveKit
    events, the webhooks dropped) and its KV buckets' (``KV_<namespace>_…``: the cordons). Best
    effort: a leftover is only litter, said in the log."""
    try:
        client = await nats.connect(nats_url, connect_timeout=2, allow_reconnect=False)
    except Exception as exc:  # nats-py raises a handful of unrelated types here
        log(f"NATS: could not delete namespace {namespace}: {exc}")
        return
    try:
        js = client.jetstream()
        ours = (f"{namespace}_", f"KV_{namespace}_")
        names = [i.config.name for i in await js.streams_info() if i.config.name]
        for name in [n for n in names if n.startswith(ours)]:
            await js.delete_stream(name)
        log(f"NATS namespace {namespace} deleted")
    except Exception as exc:
        log(f"NATS: could not delete namespace {namespace}: {exc}")
    finally:
        await client.close()


# ---------------------------------------------------------------- a running `up`


def listener(port: int) -> psutil.Process:
    """The process listening on ``port`` (a served service under ``up``); ``LookupError`` if
    nothing does."""
    import psutil

    for conn in psutil.net_connections(kind="tcp"):
        if conn.status == psutil.CONN_LISTEN and conn.laddr.port == port and conn.pid:
            return psutil.Process(conn.pid)
    raise LookupError(f"nothing listens on port {port}")


def up_livekit_keys(dispatcher_url: str) -> dict[str, tuple[str, str]]:
    """Each environment's stand-in key and secret under a running ``up`` (environment → (key,
    secret)): ``up`` makes them at random and keeps them only in its services' environments,
    so they are read from the process serving ``dispatcher_url`` (``PINECALL_LIVEKIT_KEYS``), as
    an operator on the machine could. ``LookupError`` if nothing listens there."""
    served = listener(int(dispatcher_url.rsplit(":", 1)[1]))
    found: dict[str, tuple[str, str]] = {}
    for item in served.environ()["PINECALL_LIVEKIT_KEYS"].split(","):
        environment, pair = item.split("=", 1)
        key, secret = pair.split(":", 1)
        found[environment] = (key, secret)
    return found
