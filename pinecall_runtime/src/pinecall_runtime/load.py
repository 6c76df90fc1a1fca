"""``pinecall-runtime load``: the call log under the golden call's traffic (issue 5, "Load").

Starts call-log replicas (real processes) on a database of its own (:mod:`.loadrig`), then, for
each number of ``--calls`` (one, or steps ``100,250,500``), drives that many simulated calls for
``--duration`` seconds as workers would, through the workers' writer (:mod:`.loaddrive`), and reads
every log back and verifies it: the writer's entries, once each, in order. Steps go up on the
same replicas, stopping after the first step that does not hold (p99 at or over
``--target-p99-ms``, or a log wrong). Before the first step, ``--warmup`` seconds of its calls open
the replicas' connections and compile their statements, as in a service that has been running.

Each step reports request latency (opens, batches and seals; a tool call's round trip waits for the
app and is counted apart) as p50/p95/p99, overall and by kind, entries a second, and the CPU each
part spent over the step, as cores and cores per 1 000 calls: the Postgres backends serving this
run's database, Postgres's own processes (shared with every database on the server), the replicas
(their Granian processes) and the drivers, with how late the drivers' event loops woke. On one
machine they all share the cores, with whatever else runs: the load average before each step is
reported beside its numbers. ``--plot FILE.png`` draws the steps (:func:`.plots.draw_load`).
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import click

from pinecall_runtime.loaddrive import (
    ENTRIES_PER_S,
    Driven,
    Plan,
    drive_all,
    plans,
    quantile,
    verify,
)
from pinecall_runtime.loadrig import Cpu, Rig, loadavg, replicas
from pinecall_servicekit.operator import Number, OperatorSettings, table

MAX_CALLS = 20_000


class Steps(click.ParamType[tuple[int, ...]]):
    """A number of calls, or steps of them: ``100`` or ``100,250,500`` (each 1–20 000)."""

    name = "N[,N…]"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> tuple[int, ...]:
        if isinstance(value, tuple):
            return value
        try:
            steps = tuple(int(v) for v in str(value).split(","))
        except ValueError:
            self.fail(f"{value!r} is not a number of calls or a list of them (100,250,500)")
        if not all(1 <= s <= MAX_CALLS for s in steps):
            self.fail(f"{value!r}: each number of calls is 1 to {MAX_CALLS}")
        return steps


@click.command()
@click.option(
    "--calls",
    "steps",
    default="100",
    show_default=True,
    type=Steps(),
    help="Calls at once; comma-separated steps (100,250,500) go up on the same replicas.",
)
@click.option(
    "--duration",
    default=30.0,
    show_default=True,
    type=Number(0, min_open=True),
    help="Seconds each call runs (each step).",
)
@click.option("--replicas", "replicas_n", default=2, show_default=True, type=click.IntRange(1, 8))
@click.option(
    "--batch-every",
    default=1.0,
    show_default=True,
    type=Number(0, min_open=True),
    help="Seconds between a call's batches.",
)
@click.option("--per-entry", is_flag=True, help="One entry per request, for comparison.")
@click.option(
    "--alone",
    is_flag=True,
    help="Each call's batch in a request of its own, not with its worker's (the wire before).",
)
@click.option(
    "--seats",
    default=32,
    show_default=True,
    type=click.IntRange(1, 1000),
    help="Calls a simulated worker holds (each worker has its own client and connections).",
)
@click.option(
    "--drivers",
    default=1,
    show_default=True,
    type=click.IntRange(1, 64),
    help="Driver processes the workers are shared out over.",
)
@click.option(
    "--ramp",
    default=10.0,
    show_default=True,
    type=Number(0),
    help="Seconds the calls' opens (and so their seals) are spread over.",
)
@click.option(
    "--db-pool-size",
    type=click.IntRange(1, 500),
    default=None,
    help="Postgres connections per replica (PINECALL_DB_POOL_SIZE; default the service's).",
)
@click.option(
    "--target-p99-ms",
    default=50.0,
    show_default=True,
    type=Number(0, min_open=True),
    help="A step holds when every log verifies and request p99 is under this.",
)
@click.option(
    "--warmup",
    default=5.0,
    show_default=True,
    type=Number(0),
    help="Seconds of the first step's calls first, not measured (0: none).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON only.")
@click.option(
    "--plot",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Draw latency percentiles and cores per step as a PNG here.",
)
def load(
    steps: tuple[int, ...],
    duration: float,
    replicas_n: int,
    batch_every: float,
    per_entry: bool,
    alone: bool,
    seats: int,
    drivers: int,
    ramp: float,
    db_pool_size: int | None,
    target_p99_ms: float,
    warmup: float,
    as_json: bool,
    plot: Path | None,
) -> None:
    """Drive the call log with CALLS golden calls for DURATION s; verify every log."""
    settings = OperatorSettings.from_env()
    env = {} if db_pool_size is None else {"PINECALL_DB_POOL_SIZE": str(db_pool_size)}
    mode = ("per-entry" if per_entry else f"batch every {batch_every} s") + (
        ", each alone" if alone else ", a worker's together"
    )
    reports: list[dict[str, Any]] = []
    with replicas(settings, replicas_n, env) as rig:

        def step(calls: int, duration_s: float, n: int) -> list[Plan]:
            return plans(
                rig.urls, rig.key, calls=calls, seats=seats, drivers=drivers,
                duration_s=duration_s, every_s=batch_every, per_entry=per_entry,
                ramp_s=ramp, step=n, alone=alone,
            )  # fmt: skip

        if warmup:
            drive_all(step(steps[0], warmup, 0), deadline_s=warmup * 10 + 600)
        for n, calls in enumerate(steps):
            before = loadavg()
            report = _step(rig, step(calls, duration, n + 1), calls, duration) | {
                "duration_s": duration,
                "mode": mode,
                "replicas": replicas_n,
                "seats": seats,
                "drivers": min(drivers, -(-calls // seats)),
                "loadavg_before": before,
            }
            report["held"] = report["verified"] and report["p99_ms"] < target_p99_ms
            reports.append(report)
            click.echo(
                f"load: {calls} calls ({mode}): p99 {report['p99_ms']} ms, "
                f"verified {report['verified']}, load average {before}",
                err=True,
            )
            if not report["held"]:
                break
    held = [r["calls"] for r in reports if r["held"]]
    out = {"target_p99_ms": target_p99_ms, "held": max(held, default=0), "steps": reports}
    if not as_json:
        click.echo(table(COLUMNS, [[r[c] for c in COLUMNS] for r in reports]))
    click.echo(json.dumps(out))
    if plot is not None:
        from pinecall_runtime.plots import draw_load  # matplotlib: only when asked

        draw_load(out, plot)
        click.echo(f"load: plot in {plot}", err=True)


def _step(rig: Rig, shared: list[Plan], calls: int, duration: float) -> dict[str, Any]:
    """Drive one step's plans, read every log back; the step's report."""
    readings: list[tuple[Cpu, float]] = []

    def started() -> None:
        readings.append((Cpu.read(rig), time.perf_counter()))

    seen = drive_all(shared, started=started, deadline_s=duration * 10 + 600)
    (before, t0), after = readings[0], Cpu.read(rig)
    elapsed = time.perf_counter() - t0
    problems = asyncio.run(verify(rig.urls[0], rig.key, seen.calls)) + seen.errors
    return _report(calls, seen, elapsed, after.since(before), problems)


COLUMNS = (
    "calls", "mode", "p50_ms", "p95_ms", "p99_ms", "batch_p99_ms", "entries_per_s",
    "postgres_cores_per_1000_calls", "replicas_cores", "driver_cores", "driver_lag_p99_ms",
    "verified", "held", "loadavg_before",
)  # fmt: skip
"""The table's columns (every step's JSON holds more)."""


def _report(
    calls: int,
    seen: Driven,
    elapsed: float,
    cpu: tuple[float | None, float | None, float],
    problems: list[str],
) -> dict[str, Any]:
    """One step's numbers: latencies in ms, CPU in seconds, cores, and cores per 1 000 calls.
    ``cpu`` is what :meth:`Cpu.since` says: Postgres's backends, its own processes, the replicas."""
    every = [v for values in seen.latencies.values() for v in values]

    def ms(values: list[float], q: float) -> float:
        return round(quantile(values, q) * 1000, 2)

    def spent(name: str, cpu_s: float | None) -> dict[str, Any]:
        if cpu_s is None:
            return {
                f"{name}_cpu_s": None,
                f"{name}_cores": None,
                f"{name}_cores_per_1000_calls": None,
            }
        return {
            f"{name}_cpu_s": round(cpu_s, 2),
            f"{name}_cores": round(cpu_s / elapsed, 3),
            f"{name}_cores_per_1000_calls": round(cpu_s / elapsed * 1000 / calls, 3),
        }

    report: dict[str, Any] = {
        "calls": calls,
        "elapsed_s": round(elapsed, 2),
        "entries": seen.entries,
        "entries_per_s": round(seen.entries / elapsed, 1),
        "offered_entries_per_s": round(calls * ENTRIES_PER_S, 1),
        "requests": len(every),
        "requests_per_s": round(len(every) / elapsed, 1),
        "batch_requests": seen.sent,
        "batches_a_request": round(len(seen.latencies["batch"]) / seen.sent, 1) if seen.sent else 0,
        "tool_calls": seen.tools,
        "p50_ms": ms(every, 0.50),
        "p95_ms": ms(every, 0.95),
        "p99_ms": ms(every, 0.99),
        "max_ms": ms(every, 1.0),
    }
    for kind, values in seen.latencies.items():
        report |= {f"{kind}_p50_ms": ms(values, 0.5), f"{kind}_p99_ms": ms(values, 0.99)}
    backends, background, replicas_cpu = cpu
    return (
        report
        | {"verified": not problems, "problems": problems[:20]}
        | spent("postgres", backends)
        | spent("postgres_own", background)
        | spent("replicas", replicas_cpu)
        | spent("driver", seen.cpu_s)
        | {"driver_lag_p99_ms": ms(seen.lag, 0.99)}
    )
