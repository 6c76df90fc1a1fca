"""The tool round trip (issue 16, acceptance 7): a worker's ask → call-log → the app's socket → the
app → its result → the worker, with the call on one call-log replica and the socket on the other;
and what holding sockets and calls costs the replica that holds them. Not a test: nothing asserts
a time.

Setup (``benchkit.py``): the running Postgres and NATS (or embedded ones), a database and NATS
namespace of the run's own, two call-log replicas as processes (``call-log serve``, one Granian
worker each: ``a`` and ``b``), the agent ``bench`` (one tool, ``echo``) defined with an app key, and
the SDK's app (``tool_app.py`` under ``pinecall start``) dialled to ``b``.

1. **Round trip.** ``--calls`` calls (50) are opened on ``a`` as a worker opens them
   (``CallLogClient.open``, a fleet key); ``a`` hands each to the app's socket on ``b``. Tool calls
   are then asked on ``a`` through the worker's own path (``CallLogClient.tool``), ``--rate`` a
   second (50) for ``--seconds`` (20), open loop (each at its own time, the calls in turn).
   Printed: the round trip's p50/p99/max, tool calls answered and failed, how late this process
   sent them, and the CPU of ``a``, ``b``, the app and this process.
2. **Holding.** For each step of ``--holds K:M,…`` (100:1000,400:4000), K more sockets dial ``b``
   from this process (hello, the agent registered, a ping each heartbeat, every frame read) and
   M more calls are opened on ``a``, which ``b`` hands to them. Then ``b``'s memory (RSS of its
   processes) and CPU while it only holds them (``--idle-s``, 15: one heartbeat), per socket and
   per call against the step before; and the round trip of 1 again, with all of it held.

    .venv/bin/python bench/tool_roundtrip.py [--rate 50] [--seconds 20] [--holds 100:1000] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import nats
import psutil
from benchkit import Bench, bench_platform, bounded, log, self_cpu_s, tree_cpu_s
from websockets.asyncio.client import ClientConnection, connect

from pinecall_clients.calllog import CallLogClient
from pinecall_clients.errors import CallLogRefused, CallLogUnavailable
from pinecall_contracts.agents import AgentDefinition, AgentTool
from pinecall_contracts.appsocket import (
    SUBPROTOCOL,
    AgentRegister,
    CallAttached,
    Hello,
    Holding,
    Ping,
    ToApp,
    Welcome,
)
from pinecall_contracts.base import decode, encode
from pinecall_contracts.calls import CallOpen, ToolCall
from pinecall_contracts.subjects import Subjects
from pinecall_servicekit.platform import ensure_platform
from pinecall_servicekit.settings import Settings

HERE = Path(__file__).resolve().parent
ORG = "org_bench"
AGENT = AgentDefinition(
    name="bench",
    prompt="You answer with what the tool says.",
    tools=[AgentTool(name="echo", description="Say the arguments back.", timeout_s=10)],
)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)] if ordered else float("nan")


def rss_mib(pid: int) -> float:
    """Resident memory of process ``pid`` and its children (Granian's server and worker), MiB."""
    root = psutil.Process(pid)
    return sum(p.memory_info().rss for p in [root, *root.children(recursive=True)]) / 2**20


def opening(call: str) -> CallOpen:
    return CallOpen(
        call=call, agent=AGENT.name, org=ORG, environment="production", room=f"room-{call}",
        worker="pinecall/bench-worker.1", config={}, prompt_hash=None,
    )  # fmt: skip


async def held_by_b(nats_url: str, namespace: str, within_s: float = 60.0) -> None:
    """Once a replica says (``apps.holding``) that a socket of it takes the agent's calls, and
    two announcements more, so ``a`` heard it too."""
    client = await nats.connect(nats_url)
    heard = asyncio.Event()

    async def on(msg: Any) -> None:
        if ("production", ORG, AGENT.name) in decode(msg.data, Holding).agents:
            heard.set()

    try:
        await client.subscribe(Subjects(namespace).apps_holding, cb=on)
        await asyncio.wait_for(heard.wait(), within_s)
    finally:
        await client.close()
    await asyncio.sleep(2.0)  # two of a's announce periods (1 s): a has heard b by then


async def round_trip(
    client: CallLogClient,
    calls: list[str],
    rate: float,
    seconds: float,
    tag: str,
    pids: dict[str, int],
) -> dict[str, Any]:
    """``rate`` tool calls a second for ``seconds`` on ``calls`` in turn, each at its time."""
    loop = asyncio.get_running_loop()
    count, latencies, late, failed = int(rate * seconds), [], [], Counter[str]()
    start = loop.time() + 0.2

    async def one(i: int) -> None:
        await asyncio.sleep(max(0.0, start + i / rate - loop.time()))
        sent = loop.time()
        late.append(sent - (start + i / rate))
        tool = ToolCall(id=f"{tag}-{i}", name="echo", arguments={"n": i}, timeout_s=10)
        try:
            result = await client.tool(calls[i % len(calls)], tool)
        except (CallLogRefused, CallLogUnavailable) as exc:
            failed[type(exc).__name__] += 1
            return
        if result.error is not None:
            failed[result.error] += 1
        else:
            latencies.append(loop.time() - sent)

    cpu = {name: tree_cpu_s(pid) or 0.0 for name, pid in pids.items()}
    mine, wall = self_cpu_s(), time.monotonic()
    await asyncio.gather(*(one(i) for i in range(count)))
    wall = time.monotonic() - wall
    cores = {name: ((tree_cpu_s(pid) or 0.0) - cpu[name]) / wall for name, pid in pids.items()}
    cores["bench"] = (self_cpu_s() - mine) / wall
    ms = [x * 1000 for x in latencies]
    return {
        "asked": count, "answered": len(ms), "failed": dict(failed),
        "p50_ms": pct(ms, 0.5), "p99_ms": pct(ms, 0.99), "max_ms": max(ms, default=float("nan")),
        "sent_late_p99_ms": pct([x * 1000 for x in late], 0.99),
        "cores": {k: round(v, 3) for k, v in cores.items()}, "loadavg": list(os.getloadavg()),
    }  # fmt: skip


class Idle:
    """Sockets this process holds to ``b``, as app processes that take calls and do nothing."""

    def __init__(self, url: str, key: str) -> None:
        self.url = url.replace("http://", "ws://", 1) + "/v1/apps/socket"
        self.key = key
        self.attached = 0
        self.changed = asyncio.Event()
        self.tasks: list[asyncio.Task[None]] = []
        self.stack = contextlib.AsyncExitStack()

    async def dial(self, k: int, first: int) -> None:
        gate = asyncio.Semaphore(16)

        async def one(n: int) -> None:
            async with gate:
                ws = await self.stack.enter_async_context(
                    connect(self.url, subprotocols=[SUBPROTOCOL],  # type: ignore[list-item]
                            additional_headers={"Authorization": f"Bearer {self.key}"},
                            max_queue=None)
                )  # fmt: skip
                await ws.send(encode(Hello(versions=[1], instance=f"idle-{n}", org=ORG)).decode())
                welcome = msgspec.json.decode(await ws.recv(), type=Welcome)
                await ws.send(encode(AgentRegister(agent=AGENT.name)).decode())
                await ws.recv()  # agent.registered
                self.tasks.append(asyncio.create_task(self._serve(ws, welcome.heartbeat_s)))

        await asyncio.gather(*(one(n) for n in range(first, first + k)))

    async def _serve(self, ws: ClientConnection, heartbeat_s: float) -> None:
        async def ping() -> None:
            while True:
                await asyncio.sleep(heartbeat_s)  # the SDK's pace: one frame each heartbeat
                await ws.send(encode(Ping(t=time.time())).decode())

        pinging = asyncio.create_task(ping())
        try:
            async for text in ws:
                if isinstance(msgspec.json.decode(text, type=ToApp), CallAttached):
                    self.attached += 1
                    self.changed.set()
        finally:
            pinging.cancel()

    async def until_attached(self, count: int, within_s: float = 300.0) -> None:
        async with asyncio.timeout(within_s):
            while self.attached < count:
                self.changed.clear()
                await self.changed.wait()

    @contextlib.asynccontextmanager
    async def holding(self) -> AsyncIterator[Idle]:
        async with self.stack:
            try:
                yield self
            finally:
                for task in self.tasks:
                    task.cancel()
                await asyncio.gather(*self.tasks, return_exceptions=True)


async def open_calls(client: CallLogClient, names: list[str]) -> None:
    gate = asyncio.Semaphore(32)

    async def one(call: str) -> None:
        async with gate:
            await client.open(opening(call))

    await asyncio.gather(*(one(c) for c in names))


async def idle_cost(pid: int, idle_s: float) -> tuple[float, float]:
    """``pid``'s memory (MiB) and its CPU (cores) over ``idle_s`` of holding only."""
    before, wall = tree_cpu_s(pid) or 0.0, time.monotonic()
    await asyncio.sleep(idle_s)  # nothing asked: what holding alone costs
    return rss_mib(pid), ((tree_cpu_s(pid) or 0.0) - before) / (time.monotonic() - wall)


async def measure(bench: Bench, url_a: str, url_b: str, app: int, args: Any) -> dict[str, Any]:
    pids = {"a": bench.replicas["a"][1].pid, "b": bench.replicas["b"][1].pid, "app": app}
    report: dict[str, Any] = {"holds": []}
    async with (
        CallLogClient(url_a, bench.fleet_key) as client,
        CallLogClient(url_a, bench.fleet_key) as opener,  # a pool of its own: opens never wait
    ):  # on a round trip's connections
        calls = [f"rt-{n}" for n in range(args.calls)]
        await open_calls(opener, calls)
        await asyncio.gather(
            *(client.tool(c, ToolCall(id="warm", name="echo", timeout_s=10)) for c in calls)
        )
        log(f"{len(calls)} calls open on a, held by the app on b; round trip at {args.rate}/s")
        memory, cpu = await idle_cost(pids["b"], args.idle_s)
        report["b_idle"] = {"rss_mib": round(memory, 1), "cores": round(cpu, 4)}
        report["round_trip"] = await round_trip(client, calls, args.rate, args.seconds, "p0", pids)
        log(f"round trip: {report['round_trip']}")
        sockets = held = 0
        last = report["b_idle"]["rss_mib"]
        async with Idle(url_b, bench.app_key).holding() as idle:
            for step, (k, m) in enumerate(args.holds, start=1):
                await idle.dial(k, sockets)
                with_sockets, cores_sockets = await idle_cost(pids["b"], args.idle_s)
                names = [f"held-{n}" for n in range(held, held + m)]
                opened = time.monotonic()
                try:
                    await open_calls(opener, names)
                    await idle.until_attached(held + m)
                except (CallLogUnavailable, TimeoutError) as exc:  # keep what was measured
                    log(f"step {step} stopped: calls not opened or not handed ({exc!r})")
                    report["stopped"] = f"step {step}: {exc!r}"
                    break
                opened = time.monotonic() - opened
                sockets, held = sockets + k, held + m
                with_calls, cores_calls = await idle_cost(pids["b"], args.idle_s)
                trip = await round_trip(client, calls, args.rate, args.seconds, f"p{step}", pids)
                row = {
                    "sockets": sockets, "calls": held + len(calls), "rss_mib": round(with_calls, 1),
                    "kib_per_socket": round((with_sockets - last) * 1024 / k, 1),
                    "kib_per_call": round((with_calls - with_sockets) * 1024 / m, 2),
                    "cores_holding_sockets": round(cores_sockets, 4),
                    "cores_holding_calls": round(cores_calls, 4),
                    "opened_per_s": round(m / opened, 1), "round_trip": trip,
                }  # fmt: skip
                last = with_calls
                report["holds"].append(row)
                log(f"holding {sockets} sockets, {held} calls: {row}")
    return report


def render(report: dict[str, Any]) -> str:
    def trip(t: dict[str, Any]) -> str:
        c = t["cores"]
        return (
            f"{t['p50_ms']:7.1f} {t['p99_ms']:7.1f} {t['max_ms']:7.1f}  {t['answered']:>4}/"
            f"{t['asked']:<4} {sum(t['failed'].values()):>6}  {t['sent_late_p99_ms']:7.1f}  "
            f"{c['a']:.2f} {c['b']:.2f} {c['app']:.2f} {c['bench']:.2f}  "
            + " ".join(f"{x:.2f}" for x in t["loadavg"])
        )

    s, b = report["settings"], report["b_idle"]
    stopped = [f"stopped at {report['stopped']}"] if "stopped" in report else []
    lines = [
        f"tool round trip: asked on a, answered over a socket on b, {s['rate']:g}/s for "
        f"{s['seconds']:g} s ({os.cpu_count()} cores; loadavg before {report['loadavg_before']})",
        "",
        "held on b                p50 ms  p99 ms  max ms  answered  failed  late ms  "
        "cores a b app bench  loadavg after",
        f"{s['calls']:>6} calls    1 socket  {trip(report['round_trip'])}",
        *(
            f"{h['calls']:>6} calls {h['sockets'] + 1:>4} sockets {trip(h['round_trip'])}"
            for h in report["holds"]
        ),
        "",
        "what b holds                      RSS MiB  KiB a socket  KiB a call  cores holding "
        "(sockets, +calls)  opened+handed /s",
        f"{s['calls']:>6} calls    1 socket          {b['rss_mib']:7.1f}  {'':12}  {'':10}  "
        f"{b['cores']:.4f}",
        *(
            f"{h['calls']:>6} calls {h['sockets'] + 1:>4} sockets         {h['rss_mib']:7.1f}  "
            f"{h['kib_per_socket']:12.1f}  {h['kib_per_call']:10.2f}  "
            f"{h['cores_holding_sockets']:.4f}, {h['cores_holding_calls']:.4f}"
            f"{'':17}{h['opened_per_s']:8.1f}"
            for h in report["holds"]
        ),
        *stopped,
    ]
    return "\n".join(lines)


def holds(text: str) -> list[tuple[int, int]]:
    return [(int(k), int(m)) for k, m in (step.split(":") for step in text.split(",") if step)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=50, help="the app's calls (50)")
    parser.add_argument(
        "--rate", type=bounded(float, 0.1, 5000), default=50.0, help="tool calls a second (50)"
    )
    parser.add_argument(
        "--seconds", type=bounded(float, 0.1, 3600), default=20.0, help="each round trip's (20)"
    )
    parser.add_argument("--holds", type=holds, default=holds("100:1000,400:4000"))
    parser.add_argument(
        "--idle-s", type=bounded(float, 0, 3600), default=15.0, help="holding only, measured (15)"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    loadavg = [round(x, 2) for x in os.getloadavg()]
    settings = Settings.from_env()
    with (
        ensure_platform(settings.database_url, settings.nats_url) as platform,
        bench_platform(platform) as bench,
    ):
        bench.app_key = bench.cli(
            "keys", "create", "--kind", "app", "--name", "bench", "--environment", "production"
        )
        url_a = bench.start_replica("a", "call-log")
        url_b = bench.start_replica("b", "call-log")
        put = httpx.put(
            f"{url_a}/v1/agents/{AGENT.name}", params={"org": ORG}, content=encode(AGENT),
            headers={"authorization": f"Bearer {bench.app_key}",
                     "content-type": "application/json"},
        )  # fmt: skip
        put.raise_for_status()
        env = bench.env | {
            "TOOL_APP_URL": url_b, "TOOL_APP_KEY": bench.app_key, "TOOL_APP_ORG": ORG,
            "TOOL_APP_AGENT": encode(AGENT).decode(),
        }  # fmt: skip
        with (bench.workdir / "app.log").open("wb") as out:
            app = subprocess.Popen(
                [sys.executable, "-m", "pinecall", "start", "tool_app:app", "--app-dir",
                 str(HERE)], env=env, stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip
        try:
            asyncio.run(held_by_b(platform.nats_url, bench.namespace))
            report = asyncio.run(measure(bench, url_a, url_b, app.pid, args))
        finally:
            app.send_signal(signal.SIGTERM)
            try:
                app.wait(30)
            except subprocess.TimeoutExpired:
                app.kill()
                app.wait()
    report["settings"] = {k: v for k, v in vars(args).items() if k != "json"}
    report["loadavg_before"] = loadavg
    print(json.dumps(report, indent=2) if args.json else render(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
