"""What one call-log request costs: CPU of a replica and of Postgres a batch, and a /healthz.

Not a test. Starts one call-log replica (``pinecall_runtime.loadrig.replicas``: a real Granian
process on a database of its own, on the running or embedded Postgres and NATS), opens ``--calls``
calls, then for ``--seconds`` sends each call's writer a batch of ``--entries`` entries every
``--every`` seconds (the worker's cadence, ``FLUSH_EVERY_S``) through the production
:class:`~pinecall_clients.calllog.CallLogClient`, from a driver process of its own; then the same
rate of ``GET /healthz``. Reports, per phase, requests a second, latency p50/p99 and the replica's
and Postgres's CPU a request in ms (``/proc``: counted, not sampled, so other work on the machine
moves them little; the load average is printed beside them). With ``--pid-file F`` the replica's
Granian worker pid is written to F when the batches start (for ``py-spy record --pid``).

    .venv/bin/python bench/calllog_batches.py --calls 100 --seconds 30
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path

import psutil
import uvloop
from benchkit import bounded

from pinecall_clients.calllog import CallLogClient
from pinecall_contracts.calls import CallOpen
from pinecall_runtime.loaddrive import quantile
from pinecall_runtime.loadrig import Cpu, Rig, loadavg, replicas
from pinecall_servicekit.operator import OperatorSettings


def opening(call: str) -> CallOpen:
    """A bench call's open, as a production worker's (org ``org_bench``, agent ``bench-bot``)."""
    return CallOpen(
        call=call, agent="bench-bot", org="org_bench", environment="production",
        room=f"room-{call}", worker="pinecall/bench.1791067258",
    )  # fmt: skip


async def _batches(rig: Rig, args: argparse.Namespace, pid_file: Path | None) -> dict[str, float]:
    async with CallLogClient(rig.urls[0], rig.key, request_timeout_s=30.0) as client:
        calls = [f"bench_{i}_{time.time_ns()}" for i in range(args.calls)]
        for call in calls:
            await client.open(opening(call))
        writers = [client.writer(call) for call in calls]
        for w in writers:  # warm: the statements prepared, the connections open
            w.add("transcript.user", {"text": "warm"})
            await w.flush()
        if pid_file is not None:
            workers = psutil.Process(rig.procs[0].pid).children()
            pid = workers[0].pid if workers else rig.procs[0].pid
            await asyncio.to_thread(pid_file.write_text, str(pid))
        latencies: list[float] = []
        loop = asyncio.get_running_loop()

        async def one(k: int, request: object) -> None:
            start = loop.time() + args.every * k / args.calls  # spread over the period
            beat = 0
            while (due := start + beat * args.every) < t0 + args.seconds:
                beat += 1
                await asyncio.sleep(max(0.0, due - loop.time()))
                began = time.perf_counter()
                await request()  # type: ignore[operator]
                latencies.append(time.perf_counter() - began)

        def batch(w: object) -> object:
            async def send() -> None:
                for n in range(args.entries):
                    w.add("transcript.user", {"n": n, "text": "I'd like to move my booking"})  # type: ignore[attr-defined]
                await w.flush()  # type: ignore[attr-defined]

            return send

        async def healthz() -> None:
            await client.http.get("/healthz")

        report: dict[str, float] = {}
        for phase, requests in (
            ("batch", [batch(w) for w in writers]),
            ("healthz", [healthz for _ in writers]),
        ):
            latencies.clear()
            before, avg = Cpu.read(rig), loadavg()
            t0 = loop.time()
            await asyncio.gather(*[one(k, r) for k, r in enumerate(requests)])
            elapsed = loop.time() - t0
            pg, _, replica = Cpu.read(rig).since(before)
            n = len(latencies)
            report |= {
                f"{phase}_requests_per_s": round(n / elapsed, 1),
                f"{phase}_p50_ms": round(quantile(latencies, 0.5) * 1000, 2),
                f"{phase}_p99_ms": round(quantile(latencies, 0.99) * 1000, 2),
                f"{phase}_replica_ms": round(replica / n * 1000, 3),
                f"{phase}_postgres_ms": round((pg or 0.0) / n * 1000, 3),
                f"{phase}_loadavg": avg,  # type: ignore[dict-item]
            }
        return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--seconds", type=bounded(float, 1, 3600), default=30.0)
    parser.add_argument("--every", type=bounded(float, 0.01, 60), default=1.0)
    parser.add_argument("--entries", type=int, default=2)
    parser.add_argument("--pid-file", type=Path, default=None)
    parser.add_argument(
        "--replica-env", action="append", default=[], metavar="K=V",
        help="an environment variable of the replica's (repeat), to compare settings",
    )  # fmt: skip
    args = parser.parse_args()
    env = dict(kv.split("=", 1) for kv in args.replica_env)
    with replicas(OperatorSettings.load(), 1, env) as rig:
        report = uvloop.run(_batches(rig, args, args.pid_file))
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
