"""What ``pinecall-runtime load`` runs against, and the CPU each part of it spends.

:func:`replicas` starts call-log replicas (real Granian processes) on a database of their own and
drops it after. :class:`Cpu` reads, at the start and the end of a step, the CPU seconds of the
Postgres backends serving that database, of the Postgres server's own processes (WAL writer,
checkpointer, autovacuum: shared with every database on the server, so only a hint on a busy one),
and of the replicas' process trees. Postgres is read from ``/proc/<pid>/stat``: one on another
machine is reported as unknown (None).
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import psutil
import psycopg

from pinecall_runtime.processes import run_cli, wait_ready
from pinecall_servicekit.dburl import with_database
from pinecall_servicekit.operator import OperatorSettings
from pinecall_servicekit.platform import ensure_platform, free_port

READY_WITHIN_S = 180.0
"""How long a replica may take to answer ``/readyz``: its imports alone take 3.6 s of CPU, and
two of them starting on a shared two-core machine at a load average of 12 took over 60 s."""


@dataclass(frozen=True, slots=True)
class Rig:
    """Running replicas: their URLs, a fleet key of production, their processes, the database."""

    urls: list[str]
    key: str
    procs: list[subprocess.Popen[bytes]]
    database_url: str
    database: str


@contextmanager
def replicas(settings: OperatorSettings, count: int, env: dict[str, str]) -> Iterator[Rig]:
    """``count`` call-log processes on a new database, ready (``env`` added to theirs). Stops
    them and drops the database after."""
    with ensure_platform(settings.database_url, settings.nats_url) as platform:
        admin = platform.database_url
        name = f"pinecall_load_{secrets.token_hex(4)}"
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        url = with_database(admin, name)
        base = {k: v for k, v in os.environ.items() if not k.startswith("PINECALL_")} | {
            "PINECALL_DATABASE_URL": url,
            "PINECALL_NATS_URL": platform.nats_url,
            "PINECALL_NATS_NAMESPACE": f"load{secrets.token_hex(3)}",
            "PINECALL_LOG_LEVEL": "WARNING",
            "PINECALL_LOG_FORMAT": "text",
        }
        procs: list[subprocess.Popen[bytes]] = []
        try:
            run_cli("migrate", env=base)
            key = run_cli(
                "keys", "create", "--kind", "fleet", "--name", "load",
                "--environment", "production", env=base,
            )  # fmt: skip
            urls = []
            for _ in range(count):
                port = free_port()
                cmd = [sys.executable, "-m", "pinecall_runtime", "call-log", "serve"]
                # the replicas say what they do on stderr: stdout is the report's (--json)
                procs.append(
                    subprocess.Popen(
                        cmd, env=base | env | {"PINECALL_PORT": str(port)}, stdout=sys.stderr
                    )
                )
                urls.append(f"http://127.0.0.1:{port}")
            for u, p in zip(urls, procs, strict=True):
                wait_ready(u, p, READY_WITHIN_S)
            yield Rig(urls=urls, key=key, procs=procs, database_url=url, database=name)
        finally:
            for p in procs:
                p.terminate()
            for p in procs:
                p.wait(60)
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@dataclass(frozen=True, slots=True)
class Cpu:
    """CPU seconds so far: Postgres backends of the database and Postgres's own processes, by pid
    (None when Postgres is not on this machine), and the replicas' trees in all."""

    backends: dict[int, float] | None
    background: dict[int, float] | None
    replicas: float

    @classmethod
    def read(cls, rig: Rig) -> Cpu:
        backends, background = _postgres_cpu_s(rig.database_url, rig.database)
        return cls(backends=backends, background=background, replicas=_tree_cpu_s(rig.procs))

    def since(self, before: Cpu) -> tuple[float | None, float | None, float]:
        """Seconds spent since ``before``: (backends, Postgres's own processes, replicas). A
        process born between the readings counts whole; one that died between, not at all."""
        return (
            _spent(before.backends, self.backends),
            _spent(before.background, self.background),
            self.replicas - before.replicas,
        )


def _postgres_cpu_s(
    database_url: str, database: str
) -> tuple[dict[int, float] | None, dict[int, float] | None]:
    """CPU seconds of each backend on ``database``, and of each of the server's own processes."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid, datname = %s FROM pg_stat_activity"
            " WHERE pid <> pg_backend_pid()"
            " AND (datname = %s OR backend_type <> 'client backend')",
            (database, database),
        ).fetchall()
    backends: dict[int, float] = {}
    background: dict[int, float] = {}
    for pid, ours in rows:
        cpu = _proc_cpu_s(pid)
        if cpu is not None:  # None: it ended since (an autovacuum worker), or is not here
            (backends if ours else background)[pid] = cpu
    if rows and not backends and not background:
        return None, None  # none of them here: Postgres runs on another machine
    return backends, background


def _proc_cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of process ``pid`` (None: no such process here)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _spent(before: dict[int, float] | None, after: dict[int, float] | None) -> float | None:
    if before is None or after is None:
        return None
    return sum(v - before.get(pid, 0.0) for pid, v in after.items())


def _tree_cpu_s(procs: list[subprocess.Popen[bytes]]) -> float:
    """CPU seconds (user + system) of ``procs`` and every process under them."""
    total = 0.0
    for p in procs:
        root = psutil.Process(p.pid)
        for proc in [root, *root.children(recursive=True)]:
            times = proc.cpu_times()
            total += times.user + times.system
    return total


def loadavg() -> str:
    """The machine's load average (1, 5 and 15 minutes), as ``/proc/loadavg`` says it."""
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "unknown"
