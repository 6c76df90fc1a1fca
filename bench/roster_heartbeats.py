"""Roster heartbeat benchmark: what one replica sustains, and how fast another replica sees it.

Not a test: a script that starts its own small platform on loopback, measures, prints, and cleans
up after itself. Run it from the repository root::

    .venv/bin/python bench/roster_heartbeats.py [--workers N] [--concurrency C] [--seconds D]
                                                [--samples S] [--json]

What it sets up, the way ``pinecall-runtime up`` does (``pinecall_runtime/up.py``):

- Postgres and NATS from :func:`pinecall_servicekit.platform.ensure_platform` (the running ones,
  or embedded ones started for the run);
- a fresh database ``pcbench_<hex>`` created on the platform's admin URL, migrated with
  ``python -m pinecall_runtime migrate`` and dropped at the end (``WITH (FORCE)``);
- a NATS namespace ``bench<hex>`` of its own (its subjects and its cordons bucket, which is
  deleted at the end), so nothing else on the same NATS is disturbed;
- an operator key and a production fleet key (``keys create``);
- roster replicas ``python -m pinecall_runtime roster serve`` (Granian, one worker process each)
  on free loopback ports, ready once ``/readyz`` answers 200, stopped with SIGTERM in a
  ``finally`` (SIGKILL only if one has not exited 30 s later).

What it measures (the load comes from this process: one asyncio loop, ``httpx.AsyncClient``,
HTTP/1.1 keep-alive, at most C connections per replica):

1. Throughput of ONE replica (replica A, alone: replica B is started only afterwards). N simulated
   workers ``pinecall/bench-<i>.<start>`` of fleet ``pinecall`` (production). One unmeasured
   warm-up round posts every worker once (so the roster holds N workers, as a fleet of N would,
   and the connections are open); then C coroutines post ``POST /v1/fleet/heartbeat`` back to
   back for D seconds, each request the next worker in turn (round-robin over N). Reported: the
   200 answers per second of wall time (including the requests still in flight at the deadline),
   the latency p50/p99/max of those POSTs as this client saw them (queueing in the client
   included), the errors, the ratio to 200 heartbeats/s (1 000 workers, one heartbeat each 5 s)
   as fleet-size headroom, and the CPU used meanwhile, in cores: by this client (``getrusage``),
   by replica A's process tree (``/proc/<pid>/stat``) and by the whole machine (``/proc/stat``;
   the rest is NATS, Postgres and whatever else runs on the machine).
2. Visibility on ANOTHER replica. Replica B starts on the same Postgres and NATS namespace; a
   priming round posts every worker once to A, and the run waits until B's
   ``GET /v1/ops/fleet?fleet=pinecall`` lists all N (so B serves a fleet of N, as production
   would). Then S samples, ``--spacing-ms`` apart: each posts to A a heartbeat of worker
   ``k mod N`` whose ``active`` differs from the value that worker last had (so only this
   heartbeat can make it show), and from the instant the POST is sent polls B's
   ``GET /v1/ops/fleet?fleet=pinecall`` (operator key) back to back until the worker's row shows
   the new ``active``. The visibility of a sample is the time from sending the POST to receiving
   the first GET answer that shows it; it includes the GET itself, so the GET's own duration
   (the measure's resolution) is reported alongside. A sample unseen after ``--timeout-s`` is
   counted as a timeout, not as a number.

Caveat, printed with the results: the machine's cores are shared by this load generator, the
replica(s), NATS and Postgres, so the throughput is a lower bound for a replica with cores of its
own, and the client's CPU share says how much of the machine the load itself took.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import sys
import time
from collections import Counter
from typing import Any

import httpx
import msgspec
from benchkit import (
    bench_platform,
    bounded,
    log,
    machine_busy_s,
    self_cpu_s,
    tree_cpu_s,
)

from pinecall_servicekit.operator import table
from pinecall_servicekit.platform import ensure_platform
from pinecall_servicekit.settings import Settings

FLEET = "pinecall"
"""The production fleet (the roster's default fleets row ``pinecall=production``)."""
SEATS = 8
"""Seats of every simulated worker (``max_jobs``)."""
REFERENCE_RATE = 200.0
"""Heartbeats per second of 1 000 workers at one heartbeat each 5 s."""
START = int(time.time())
"""The ``<start>`` of every simulated worker's name."""


def percentile(values: list[float], p: float) -> float | None:
    """The nearest-rank ``p``-th percentile of ``values`` (None when empty)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 2)


def worker_name(i: int) -> str:
    return f"{FLEET}/bench-{i:06d}.{START}"


def heartbeat_body(i: int, active: int) -> bytes:
    """A ``WorkerHeartbeat`` as ``pinecall_testkit.roster`` ``heartbeat()`` builds it."""
    name = worker_name(i)
    return msgspec.json.encode(
        {
            "fleet": FLEET,
            "worker": name,
            "agent_name": name,
            "active": active,
            "max_jobs": SEATS,
            "load": active / SEATS,
            "draining": False,
        }
    )


class _Row(msgspec.Struct):
    worker: str
    active: int


class _View(msgspec.Struct):
    fleet: str
    workers: list[_Row]


class _Snapshot(msgspec.Struct):
    fleets: list[_View]


_snapshot = msgspec.json.Decoder(_Snapshot)


def fleet_rows(content: bytes) -> dict[str, int]:
    """``worker -> active`` of fleet ``pinecall`` in a ``GET /v1/ops/fleet`` answer."""
    return {
        row.worker: row.active
        for view in _snapshot.decode(content).fleets
        if view.fleet == FLEET
        for row in view.workers
    }


# ------------------------------------------------------------------------- the measurements


def client_for(url: str, key: str, concurrency: int) -> httpx.AsyncClient:
    """HTTP/1.1 keep-alive, at most ``concurrency`` connections, the key on every request."""
    return httpx.AsyncClient(
        base_url=url,
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
        limits=httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency),
        timeout=httpx.Timeout(10.0),
    )


async def post_round(client: httpx.AsyncClient, bodies: list[bytes], concurrency: int) -> None:
    """Post every body once, ``concurrency`` at a time; raise on any answer but 200."""
    queue = iter(range(len(bodies)))

    async def one() -> None:
        for i in queue:
            response = await client.post("/v1/fleet/heartbeat", content=bodies[i])
            if response.status_code != 200:
                raise RuntimeError(f"heartbeat {i}: {response.status_code} {response.text[:300]}")

    await asyncio.gather(*(one() for _ in range(concurrency)))


async def throughput(
    url: str, fleet_key: str, replica_pid: int, workers: int, concurrency: int, seconds: float
) -> dict[str, Any]:
    """Phase 1: heartbeats per second one replica answers 200, with latency and CPU."""
    bodies = [heartbeat_body(i, i % SEATS) for i in range(workers)]
    async with client_for(url, fleet_key, concurrency) as client:
        log(f"phase 1: warm-up round of {workers} heartbeats")
        await post_round(client, bodies, concurrency)
        latencies: list[float] = []
        errors: Counter[str] = Counter()
        turn = iter(range(1 << 62))

        async def one(deadline: float) -> None:
            while time.perf_counter() < deadline:
                i = next(turn) % workers
                t0 = time.perf_counter()
                try:
                    response = await client.post("/v1/fleet/heartbeat", content=bodies[i])
                except httpx.HTTPError as exc:
                    errors[type(exc).__name__] += 1
                    continue
                if response.status_code == 200:
                    latencies.append(time.perf_counter() - t0)
                else:
                    errors[str(response.status_code)] += 1

        log(f"phase 1: {concurrency} concurrent posters for {seconds:g} s")
        cpu_client0, cpu_server0, busy0 = self_cpu_s(), tree_cpu_s(replica_pid), machine_busy_s()
        started = time.perf_counter()
        await asyncio.gather(*(one(started + seconds) for _ in range(concurrency)))
        elapsed = time.perf_counter() - started
        cpu_client1, cpu_server1, busy1 = self_cpu_s(), tree_cpu_s(replica_pid), machine_busy_s()
    rate = len(latencies) / elapsed
    client_cpu = round((cpu_client1 - cpu_client0) / elapsed, 2)
    server_cpu = (
        None
        if cpu_server0 is None or cpu_server1 is None
        else round((cpu_server1 - cpu_server0) / elapsed, 2)
    )
    busy = None if busy0 is None or busy1 is None else round((busy1 - busy0) / elapsed, 2)
    return {
        "heartbeats": len(latencies),
        "errors": dict(errors),
        "seconds": round(elapsed, 3),
        "heartbeats_per_s": round(rate, 1),
        "latency_ms": {
            "p50": ms(percentile(latencies, 50)),
            "p99": ms(percentile(latencies, 99)),
            "max": ms(max(latencies, default=None)),
        },
        "headroom_vs_200_per_s": round(rate / REFERENCE_RATE, 2),
        "workers_at_one_per_5_s": int(rate * 5),
        "client_cpu_cores": client_cpu,
        "replica_cpu_cores": server_cpu,
        "machine_busy_cores": busy,
        "other_cpu_cores": (
            None if busy is None or server_cpu is None else round(busy - client_cpu - server_cpu, 2)
        ),
    }


async def visibility(
    url_a: str,
    url_b: str,
    fleet_key: str,
    operator_key: str,
    workers: int,
    concurrency: int,
    samples: int,
    spacing_s: float,
    timeout_s: float,
) -> dict[str, Any]:
    """Phase 2: time from a POST to A until B's ``GET /v1/ops/fleet`` shows its new value."""
    last = [(i + 1) % (SEATS + 1) for i in range(workers)]
    bodies = [heartbeat_body(i, last[i]) for i in range(workers)]
    async with (
        client_for(url_a, fleet_key, concurrency) as client_a,
        client_for(url_b, operator_key, 2) as client_b,
    ):

        async def rows_on_b() -> tuple[dict[str, int], float]:
            t0 = time.perf_counter()
            response = await client_b.get("/v1/ops/fleet", params={"fleet": FLEET})
            took = time.perf_counter() - t0
            if response.status_code != 200:
                raise RuntimeError(f"GET on B: {response.status_code} {response.text[:300]}")
            return fleet_rows(response.content), took

        async def post(body: bytes) -> float:
            t = time.perf_counter()
            response = await client_a.post("/v1/fleet/heartbeat", content=body)
            if response.status_code != 200:
                raise RuntimeError(f"POST to A: {response.status_code} {response.text[:300]}")
            return time.perf_counter() - t

        log(f"phase 2: priming round of {workers} heartbeats to A")
        await post_round(client_a, bodies, concurrency)
        expected = {worker_name(i): last[i] for i in range(workers)}
        deadline = time.monotonic() + 30
        while True:
            rows, _ = await rows_on_b()
            if all(rows.get(w) == a for w, a in expected.items()):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"B shows {len(rows)} of {workers} primed workers after 30 s")
            await asyncio.sleep(0.1)
        log(
            f"phase 2: B lists all {workers} workers; "
            f"{samples} samples {spacing_s * 1000:g} ms apart"
        )

        seen: list[float] = []
        gets: list[float] = []
        posts: list[float] = []
        polls: list[int] = []
        timeouts = 0
        for k in range(samples):
            i = k % workers
            last[i] = (last[i] + 1) % (SEATS + 1)
            name, value = worker_name(i), last[i]

            t0 = time.perf_counter()
            posting = asyncio.create_task(post(heartbeat_body(i, value)))
            n = 0
            while True:
                rows, took = await rows_on_b()
                n += 1
                gets.append(took)
                now = time.perf_counter()
                if rows.get(name) == value:
                    seen.append(now - t0)
                    break
                if now - t0 > timeout_s:
                    timeouts += 1
                    break
            posts.append(await posting)
            polls.append(n)
            await asyncio.sleep(spacing_s)
    return {
        "samples": samples,
        "seen": len(seen),
        "timeouts": timeouts,
        "ms": {
            "p50": ms(percentile(seen, 50)),
            "p99": ms(percentile(seen, 99)),
            "max": ms(max(seen, default=None)),
        },
        "get_on_b_ms": {"p50": ms(percentile(gets, 50)), "p99": ms(percentile(gets, 99))},
        "post_to_a_ms": {"p50": ms(percentile(posts, 50)), "p99": ms(percentile(posts, 99))},
        "gets_per_sample_mean": round(sum(polls) / len(polls), 2) if polls else None,
        "workers_listed_on_b": workers,
    }


# ------------------------------------------------------------------------------ the report


def render(report: dict[str, Any]) -> str:
    t, v, m = report["throughput"], report["visibility"], report["machine"]
    errors = ", ".join(f"{k}: {n}" for k, n in t["errors"].items()) or "0"
    rows = [
        ("1. one replica", "heartbeats/s", t["heartbeats_per_s"]),
        ("", "heartbeats (200) in", f"{t['heartbeats']} in {t['seconds']} s"),
        ("", "errors", errors),
        ("", "POST latency p50 / p99 / max", _trio(t["latency_ms"])),
        ("", "headroom (÷ 200/s of 1 000 workers)", f"{t['headroom_vs_200_per_s']}×"),
        ("", "≈ workers at 1 heartbeat / 5 s", t["workers_at_one_per_5_s"]),
        ("", "client CPU (cores)", t["client_cpu_cores"]),
        ("", "replica A CPU (cores)", t["replica_cpu_cores"]),
        ("", "machine busy (cores)", t["machine_busy_cores"]),
        ("", "  of which NATS, Postgres, others", t["other_cpu_cores"]),
        ("2. A → B visibility", "p50 / p99 / max", _trio(v["ms"])),
        ("", "samples seen / timeouts", f"{v['seen']} / {v['timeouts']}"),
        ("", "GET on B p50 / p99 (resolution)", _trio(v["get_on_b_ms"], keys=("p50", "p99"))),
        ("", "POST to A p50 / p99", _trio(v["post_to_a_ms"], keys=("p50", "p99"))),
        ("", "GETs per sample (mean)", v["gets_per_sample_mean"]),
        ("", "workers listed on B", v["workers_listed_on_b"]),
        ("", "replica exit codes", report["replica_exit_codes"]),
    ]
    s = report["settings"]
    head = (
        f"roster heartbeats: N={s['workers']} workers, C={s['concurrency']}, D={s['seconds']:g} s, "
        f"S={s['samples']} samples {s['spacing_ms']:g} ms apart\n"
        f"machine: {m['cpus']} CPU(s), load average {m['loadavg_before']} before the run; "
        f"{m['note']}\n"
    )
    return head + table(("phase", "measure", "value"), rows)


def _trio(values: dict[str, float | None], keys: tuple[str, ...] = ("p50", "p99", "max")) -> str:
    return " / ".join("-" if values[k] is None else f"{values[k]:g}" for k in keys) + " ms"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])

    parser.add_argument(
        "--workers",
        type=bounded(int, 1, 100_000),
        default=1000,
        help="simulated workers N (default 1000)",
    )
    parser.add_argument(
        "--concurrency",
        type=bounded(int, 1, 1024),
        default=32,
        help="concurrent POSTs C (default 32)",
    )
    parser.add_argument(
        "--seconds",
        type=bounded(float, 0.5, 600),
        default=10.0,
        help="seconds of load D (default 10)",
    )
    parser.add_argument(
        "--samples",
        type=bounded(int, 1, 10_000),
        default=200,
        help="visibility samples S (default 200)",
    )
    parser.add_argument(
        "--spacing-ms",
        type=bounded(float, 0, 10_000),
        default=50.0,
        help="pause between visibility samples (default 50)",
    )
    parser.add_argument(
        "--timeout-s",
        type=bounded(float, 0.1, 60),
        default=5.0,
        help="a sample unseen this long is a timeout (default 5)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of the table")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cpus = os.cpu_count() or 1
    note = (
        f"the load generator (this process, one asyncio loop) shares the {cpus} core(s) with the "
        "roster replica(s), NATS and Postgres: the throughput is a lower bound for a replica "
        "with cores of its own"
    )
    loadavg = [round(x, 2) for x in os.getloadavg()]
    settings = Settings.from_env()
    with ensure_platform(settings.database_url, settings.nats_url) as platform:
        log(
            f"postgres {platform.database_url}{' (embedded)' if platform.embedded_postgres else ''}"
            f", nats {platform.nats_url}{' (embedded)' if platform.embedded_nats else ''}"
        )
        with bench_platform(platform) as bench:
            url_a = bench.start_replica("a")
            phase1 = asyncio.run(
                throughput(
                    url_a,
                    bench.fleet_key,
                    bench.replicas["a"][1].pid,
                    args.workers,
                    args.concurrency,
                    args.seconds,
                )
            )
            url_b = bench.start_replica("b")
            phase2 = asyncio.run(
                visibility(
                    url_a,
                    url_b,
                    bench.fleet_key,
                    bench.operator_key,
                    args.workers,
                    args.concurrency,
                    args.samples,
                    args.spacing_ms / 1000,
                    args.timeout_s,
                )
            )
        report = {
            "settings": {
                "workers": args.workers,
                "concurrency": args.concurrency,
                "seconds": args.seconds,
                "samples": args.samples,
                "spacing_ms": args.spacing_ms,
                "timeout_s": args.timeout_s,
            },
            "machine": {"cpus": cpus, "loadavg_before": loadavg, "note": note},
            "platform": {
                "embedded_postgres": platform.embedded_postgres,
                "embedded_nats": platform.embedded_nats,
                "nats_namespace": bench.namespace,
                "database": bench.database,
            },
            "throughput": phase1,
            "visibility": phase2,
            "replica_exit_codes": bench.exit_codes,
        }
    print(json.dumps(report, indent=2) if args.json else render(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
