"""``pinecall-runtime load``: the call log under the golden call's traffic (issue 5, "Load").

Starts call-log replicas (real processes) on a database of its own, then drives ``--calls``
simulated calls for ``--duration`` seconds as workers would, through the workers' writer
(:mod:`pinecall_clients.calllog`): each call opens, writes 2.1 entries a second in the batches a
worker sends (one each ``--batch-every`` seconds; ``--per-entry`` sends each entry alone, for
comparison), asks a tool now and then (nobody answers: it times out once, 0.2 s), ends and seals.
Then every log is read back and verified: the writer's entries, once each, in order.

Postgres CPU is the CPU time of the Postgres backends serving this run's database, read from
``/proc/<pid>/stat`` at the start and the end (the server's own background processes are not
counted; a Postgres on another machine is reported as unknown). The replicas' CPU (their Granian
processes) and the driver's own are reported beside it: on one machine they share the cores.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import secrets
import subprocess
import sys
import time
from collections.abc import Awaitable
from typing import Any, TypeVar

import click
import httpx
import psutil
import psycopg

from pinecall_clients.calllog import CallLogClient
from pinecall_contracts.calls import CallOpen, ToolCall
from pinecall_runtime.processes import run_cli, wait_ready
from pinecall_servicekit.operator import OperatorSettings, table
from pinecall_servicekit.platform import ensure_platform, free_port

ENTRIES_PER_S = 2.1
"""The golden call's entries a second (seed 002)."""
T = TypeVar("T")


class Stats:
    """Request latencies in seconds, and what went wrong. A tool call's round trip waits for
    the app (here its 0.2 s timeout, as nobody answers): it is counted apart."""

    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.tools = 0
        self.errors: list[str] = []
        self.entries = 0

    async def timed(self, what: Awaitable[T]) -> T:
        started = time.perf_counter()
        try:
            return await what
        finally:
            self.latencies.append(time.perf_counter() - started)

    def quantile(self, q: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


async def _call(
    i: int, client: CallLogClient, stats: Stats, duration: float, every: float, per_entry: bool
) -> tuple[str, int]:
    rng = random.Random(i)
    call = f"load_{i}_{secrets.token_hex(3)}"
    await asyncio.sleep(rng.uniform(0, every))  # calls do not all start in the same instant
    opened = CallOpen(
        call=call,
        agent="load-bot",
        org="org_load",
        environment="production",
        room=f"room-{call}",
        worker="pinecall/load.1791067258",
    )
    await stats.timed(client.open(opened))
    writer = client.writer(call)
    loop = asyncio.get_running_loop()
    stop_at = loop.time() + duration
    step = 1 / ENTRIES_PER_S if per_entry else every
    owed, written, tools = 0.0, 0, 0
    next_tool = loop.time() + rng.uniform(10, 40)
    while loop.time() < stop_at:
        await asyncio.sleep(step)  # the worker's flush period: a simulation's clock, not a wait
        owed += ENTRIES_PER_S * step
        while owed >= 1:
            writer.add("transcript.user", {"n": written, "text": "I'd like to move my booking"})
            written, owed = written + 1, owed - 1
        if writer.queued:
            await stats.timed(writer.flush())
        if loop.time() >= next_tool:
            tools += 1
            tool = ToolCall(id=f"tc{tools}", name="lookup", timeout_s=0.2)
            await client.tool(call, tool)
            stats.tools += 1
            next_tool = loop.time() + rng.uniform(20, 60)
    await writer.drain()
    await stats.timed(client.seal(call, "completed"))
    stats.entries += written
    if writer.refused:
        stats.errors.append(f"{call}: {len(writer.refused)} batches refused")
    return call, written


async def _verify(client: CallLogClient, call: str, written: int) -> str | None:
    response = await client.http.get(f"/v1/calls/{call}/entries")
    log = response.json()
    counted = [e["data"]["n"] for e in log["entries"] if e["counted"] is not None]
    seqs = [e["seq"] for e in log["entries"]]
    if counted != list(range(written)) or seqs != list(range(1, len(seqs) + 1)):
        return f"{call}: the log does not hold the writer's {written} entries once each in order"
    if log["state"] != "sealed":
        return f"{call}: not sealed"
    return None


def _backend_cpu_s(database_url: str, database: str) -> dict[int, float] | None:
    """CPU seconds of each Postgres backend on ``database`` (None when not on this machine)."""
    ticks = os.sysconf("SC_CLK_TCK")
    with psycopg.connect(database_url, autocommit=True) as conn:
        pids = [
            r[0]
            for r in conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
                (database,),
            )
        ]
    cpu = {}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            return None
        cpu[pid] = (int(fields[11]) + int(fields[12])) / ticks
    return cpu


async def _drive(
    urls: list[str], key: str, calls: int, duration: float, every: float, per_entry: bool
) -> tuple[Stats, list[str], float]:
    size = max(100, calls // len(urls) + 10)
    limits = httpx.Limits(max_connections=size, max_keepalive_connections=size)
    clients = [CallLogClient(url, key, request_timeout_s=30.0, limits=limits) for url in urls]
    stats = Stats()
    started = time.perf_counter()
    try:
        done = await asyncio.gather(
            *[
                _call(i, clients[i % len(clients)], stats, duration, every, per_entry)
                for i in range(calls)
            ]
        )
        elapsed = time.perf_counter() - started
        checks = await asyncio.gather(
            *[_verify(clients[0], call, written) for call, written in done]
        )
        return stats, [c for c in checks if c is not None] + stats.errors, elapsed
    finally:
        for c in clients:
            await c.aclose()


@click.command()
@click.option("--calls", default=100, show_default=True, type=click.IntRange(1, 20_000))
@click.option("--duration", default=30.0, show_default=True, help="Seconds each call runs.")
@click.option("--replicas", default=2, show_default=True, type=click.IntRange(1, 8))
@click.option("--batch-every", default=1.0, show_default=True, help="Seconds between batches.")
@click.option("--per-entry", is_flag=True, help="One entry per request, for comparison.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON only.")
def load(
    calls: int, duration: float, replicas: int, batch_every: float, per_entry: bool, as_json: bool
) -> None:
    """Drive the call log with CALLS golden calls for DURATION s; verify every log."""
    settings = OperatorSettings.from_env()
    with ensure_platform(settings.database_url, settings.nats_url) as platform:
        admin = platform.database_url
        name = f"pinecall_load_{secrets.token_hex(4)}"
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        url = psycopg.conninfo.make_conninfo(admin, dbname=name)
        url = f"postgresql://{_dsn_to_url(url)}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("PINECALL_")} | {
            "PINECALL_DATABASE_URL": url,
            "PINECALL_NATS_URL": platform.nats_url,
            "PINECALL_NATS_NAMESPACE": f"load{secrets.token_hex(3)}",
            "PINECALL_LOG_LEVEL": "WARNING",
            "PINECALL_LOG_FORMAT": "text",
        }
        procs: list[subprocess.Popen[bytes]] = []
        try:
            run_cli("migrate", env=env)
            key = run_cli(
                "keys", "create", "--kind", "fleet", "--name", "load",
                "--environment", "production", env=env,
            )  # fmt: skip
            urls = []
            for _ in range(replicas):
                port = free_port()
                cmd = [sys.executable, "-m", "pinecall_runtime", "call-log", "serve"]
                procs.append(subprocess.Popen(cmd, env=env | {"PINECALL_PORT": str(port)}))
                urls.append(f"http://127.0.0.1:{port}")
            for u, p in zip(urls, procs, strict=True):
                wait_ready(u, p)
            before = _backend_cpu_s(url, name)
            replicas_before = _tree_cpu_s(procs)
            driver_before = time.process_time()
            stats, problems, elapsed = asyncio.run(
                _drive(urls, key, calls, duration, batch_every, per_entry)
            )
            driver_cpu = time.process_time() - driver_before
            replicas_cpu = _tree_cpu_s(procs) - replicas_before
            after = _backend_cpu_s(url, name)
        finally:
            for p in procs:
                p.terminate()
            for p in procs:
                p.wait(60)
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    pg_cpu = (
        None
        if before is None or after is None
        else sum(v - before.get(pid, 0.0) for pid, v in after.items())
    )
    report: dict[str, Any] = {
        "calls": calls,
        "duration_s": duration,
        "mode": "per-entry" if per_entry else f"batch every {batch_every} s",
        "elapsed_s": round(elapsed, 2),
        "entries": stats.entries,
        "entries_per_s": round(stats.entries / elapsed, 1),
        "requests": len(stats.latencies),
        "tool_calls": stats.tools,
        "p50_ms": round(stats.quantile(0.50) * 1000, 2),
        "p95_ms": round(stats.quantile(0.95) * 1000, 2),
        "p99_ms": round(stats.quantile(0.99) * 1000, 2),
        "verified": not problems,
        "problems": problems[:20],
        "replicas_cpu_s": round(replicas_cpu, 2),
        "replicas_cores": round(replicas_cpu / elapsed, 3),
        "driver_cpu_s": round(driver_cpu, 2),
        "postgres_cpu_s": None if pg_cpu is None else round(pg_cpu, 2),
        "postgres_cores": None if pg_cpu is None else round(pg_cpu / elapsed, 3),
        "postgres_cores_per_1000_calls": None
        if pg_cpu is None
        else round(pg_cpu / elapsed * 1000 / calls, 3),
    }
    if as_json:
        click.echo(json.dumps(report))
        return
    rows = [(k, json.dumps(v) if isinstance(v, list) else v) for k, v in report.items()]
    click.echo(table(("measure", "value"), rows))
    click.echo(json.dumps(report))


def _tree_cpu_s(procs: list[subprocess.Popen[bytes]]) -> float:
    """CPU seconds (user + system) of ``procs`` and every process under them."""
    total = 0.0
    for p in procs:
        root = psutil.Process(p.pid)
        for proc in [root, *root.children(recursive=True)]:
            times = proc.cpu_times()
            total += times.user + times.system
    return total


def _dsn_to_url(conninfo: str) -> str:
    parts = psycopg.conninfo.conninfo_to_dict(conninfo)
    user = parts.get("user") or ""
    password = f":{parts['password']}" if parts.get("password") else ""
    auth = f"{user}{password}@" if user else ""
    return f"{auth}{parts.get('host', '127.0.0.1')}:{parts.get('port', 5432)}/{parts['dbname']}"
