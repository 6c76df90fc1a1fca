"""Ring to offer: from LiveKit's webhook arriving to the dispatcher's CreateDispatch (issue 7,
acceptance 8). Not a test: a script that starts its own small platform on loopback, measures,
prints, and cleans up after itself. Run it from the repository root::

    .venv/bin/python bench/ring_to_offer.py [--rate 50] [--seconds 20] [--workers 20] [--json]

What it sets up (``bench/benchkit.py``, as ``pinecall-runtime up`` would): the running Postgres
and NATS (or embedded ones), a database and a NATS namespace of the run's own, an operator key and
a production fleet key; then, each as its own process (``python -m pinecall_runtime … serve``,
Granian, one worker): the roster, webhook-ingest and the dispatcher. In this process: the LiveKit
stand-in, whose webhooks go to a timing relay (this process) that notes when each arrives and
hands it, bytes and headers unchanged, to webhook-ingest; and ``--workers`` simulated workers of
200 seats heartbeating to the roster every 5 s (registered nowhere: a dispatch to one stays
pending, which is all this measures).

What it measures: ``--rate`` rings a second for ``--seconds`` (after 2 s of warm-up rings at 50 a
second at most; ``--rate 500 --seconds 1`` is a burst). A ring is what LiveKit SIP makes of a phone
dialling the fleet's number: the number's Individual rule (made once, as ``numbers phone put``
makes it) creates a room of its own with a ring to the fleet's plain name carrying a CallRing, and
the caller joins it as a SIP participant (a lab-room socket), then hangs up ``--hold`` seconds
later. For each ring, the time from its
``participant_joined`` webhook arriving at the relay to the stand-in receiving the dispatcher's
CreateDispatch for that room: webhook-ingest's verify and JetStream store, the durable consumer,
the dispatcher's ListDispatch, its row, ListParticipants, the offer under the fleet's lock, and
CreateDispatch. Reported: p50/p95/p99/max in ms, rings offered and missed (no dispatch in 10 s),
the CPU each process and the machine used meanwhile, and the services' cores per 100 rings a second (the machine has two cores, shared by the
stand-in, the callers, the three services, NATS and Postgres: read the numbers as this machine's).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import shutil
import time
from typing import Any

import aiohttp
import httpx
from aiohttp import web
from benchkit import bench_platform, bounded, log, machine_busy_s, self_cpu_s, tree_cpu_s
from livekit import api
from livekit.protocol import sip

from pinecall_contracts.base import encode
from pinecall_contracts.dispatch import CallRing
from pinecall_contracts.fleet import WorkerHeartbeat
from pinecall_loadlab.livekit.callers import dial, lab_trunk
from pinecall_servicekit.operator import table
from pinecall_servicekit.platform import ensure_platform, free_port
from pinecall_servicekit.settings import Settings

KEY, SECRET = "bench-key", "bench-secret-of-at-least-32-characters"
SEATS = 200
NUMBER = "+15550199"
RING = encode(CallRing(agent="bench", org="bench")).decode()
WARM_RATE = 50.0
"""Rings a second of the 2 s warm-up, at most (a burst's rate would make the warm-up the burst)."""
SERVICES = ("roster", "webhook-ingest", "dispatcher")


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


class Relay:
    """The stand-in's webhooks, timed on arrival, handed on to webhook-ingest (aiohttp both ways:
    httpx here cost the bench a third of its CPU, on the two cores the services share)."""

    def __init__(self) -> None:
        self.ingest = ""
        self.joined_at: dict[str, float] = {}
        self.session: aiohttp.ClientSession | None = None
        self.runner: web.AppRunner | None = None

    def to(self, ingest: str) -> None:
        self.ingest = ingest

    async def forward(self, request: web.Request) -> web.Response:
        arrived = time.time()
        body = await request.read()
        event = json.loads(body)
        room = event.get("room", {}).get("name", "")
        joined = event.get("event") == "participant_joined"
        if joined and event.get("participant", {}).get("kind") == "SIP":
            self.joined_at.setdefault(room, arrived)
        headers = {k: v for k, v in request.headers.items() if k.lower() != "host"}
        assert self.session is not None
        async with self.session.post(
            self.ingest + request.path_qs, data=body, headers=headers
        ) as r:
            return web.Response(status=r.status, body=await r.read())

    async def start(self) -> str:
        self.session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30))
        app = web.Application()
        app.router.add_post("/v1/livekit/webhook", self.forward)
        self.runner = web.AppRunner(app, handle_signals=False, access_log=None)
        await self.runner.setup()
        port = free_port()
        await web.TCPSite(self.runner, "127.0.0.1", port).start()
        return f"http://127.0.0.1:{port}/v1/livekit/webhook?world=production"

    async def close(self) -> None:
        # the server first: a webhook the stand-in sends meanwhile is refused at the door, and
        # one being forwarded finishes, rather than meeting a closed session
        if self.runner is not None:
            await self.runner.cleanup()
        if self.session is not None:
            await self.session.close()


async def heartbeats(roster: str, key: str, workers: int, stop: asyncio.Event) -> None:
    start = int(time.time())
    async with httpx.AsyncClient(base_url=roster) as client:
        while not stop.is_set():
            for i in range(workers):
                name = f"pinecall/bench-{i}.{start}"
                body = WorkerHeartbeat(
                    fleet="pinecall", worker=name, agent_name=name, active=0, max_jobs=SEATS, load=0
                )
                await client.post(
                    "/v1/fleet/heartbeat",
                    content=encode(body),
                    headers={"authorization": f"Bearer {key}", "content-type": "application/json"},
                )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 5.0)  # a heartbeat's cadence


async def number(lkapi: api.LiveKitAPI) -> None:
    """The fleet's number as the runtime's phone numbers make it (``pinecall_dispatcher``'s
    numbers): an inbound trunk and an Individual rule ringing the fleet with the ring's metadata,
    each ring its own room. Made once, so a ring costs the stand-in a dial and nothing more."""
    trunk = await lab_trunk(lkapi, NUMBER)
    await lkapi.sip.create_dispatch_rule(
        sip.CreateSIPDispatchRuleRequest(
            dispatch_rule=sip.SIPDispatchRuleInfo(
                name="bench",
                trunk_ids=[trunk],
                rule=sip.SIPDispatchRule(
                    dispatch_rule_individual=sip.SIPDispatchRuleIndividual(room_prefix="ring")
                ),
                room_config=api.RoomConfiguration(
                    agents=[api.RoomAgentDispatch(agent_name="pinecall", metadata=RING)]
                ),
            )
        )
    )


async def ring(url: str, i: int, hold_s: float) -> str:
    """One ring: a phone dials the number and stays ``hold_s``, then hangs up; its room."""
    caller = await dial(url, KEY, SECRET, phone=f"+1555{i:07d}", to=NUMBER)
    await asyncio.sleep(hold_s)  # the caller stays in the call, then hangs up
    await caller.leave()
    return caller.room


async def rings(url: str, rate: float, seconds: float, first: int, hold_s: float) -> list[str]:
    """Ring ``rate`` a second for ``seconds`` (callers numbered from ``first``); the rooms rung."""
    t0 = time.monotonic()
    tasks = []
    for i in range(int(rate * seconds)):
        delay = t0 + i / rate - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)  # the rate of rings, not a wait for an event
        tasks.append(asyncio.create_task(ring(url, first + i, hold_s)))
    return list(await asyncio.gather(*tasks))


async def dispatched(url: str) -> dict[str, float]:
    """When the stand-in received each room's first CreateDispatch (its control API)."""
    token = api.AccessToken(KEY, SECRET).to_jwt()
    async with httpx.AsyncClient() as client:
        r = await client.get(
            f"{url}/lab/control/dispatches", headers={"Authorization": f"Bearer {token}"}
        )
    first: dict[str, float] = {}
    for d in r.json():
        first.setdefault(d["room"], d["at"])
    return first


async def measure(
    bench: Any, args: argparse.Namespace, relay: Relay, urls: dict[str, str]
) -> dict[str, Any]:
    lk = urls["livekit"]
    stop = asyncio.Event()
    beating = asyncio.create_task(heartbeats(urls["roster"], bench.fleet_key, args.workers, stop))
    try:
        await asyncio.sleep(6)  # one round of heartbeats heard by the roster
        log("warm-up")
        async with api.LiveKitAPI(lk, KEY, SECRET) as lkapi:
            await number(lkapi)
        warm = await rings(lk, min(args.rate, WARM_RATE), 2.0, 0, args.hold)
        pids = {name: proc.pid for name, (_, proc) in bench.replicas.items()}
        # this process relays every webhook: its own full collections (32–65 ms, the callers'
        # sockets' cycles) held rings that the dispatcher had nothing to do with, so none runs
        # while it measures (the garbage waits until the end)
        gc.freeze()
        gc.disable()
        before = {name: tree_cpu_s(pid) for name, pid in pids.items()}
        busy, me, t0 = machine_busy_s(), self_cpu_s(), time.monotonic()
        log(f"{args.rate} rings a second for {args.seconds} s")
        rooms = await rings(lk, args.rate, args.seconds, len(warm), args.hold)
        wall = time.monotonic() - t0
        after = {name: tree_cpu_s(pid) for name, pid in pids.items()}
        busy_after, me_after = machine_busy_s(), self_cpu_s()
        made = await dispatched(lk)
    finally:
        gc.enable()
        gc.unfreeze()  # what was frozen for the measure is collectable again
        stop.set()
        await beating
    latencies = [made[r] - relay.joined_at[r] for r in rooms if r in made and r in relay.joined_at]
    cpu, cpu_s = {}, {}
    for n in pids:
        start, end = before[n], after[n]
        if start is not None and end is not None:
            cpu_s[n] = end - start
            cpu[n] = round(cpu_s[n] / wall, 2)
    # CPU seconds a ring × 100 rings a second: a steady rate's cores, and a burst's too (whose
    # wall time is mostly the callers' hold)
    served = sum(cpu_s.get(n, 0.0) for n in SERVICES)
    return {
        "rate_per_s": args.rate,
        "seconds": args.seconds,
        "rings": len(rooms),
        "offered": len(latencies),
        "missed": len(rooms) - len(latencies),
        "ring_to_offer_ms": {
            p: round(1000 * percentile(latencies, q), 1)
            for p, q in (("p50", 50), ("p95", 95), ("p99", 99), ("max", 100))
        }
        if latencies
        else {},
        "cpu_cores": cpu
        | {
            "bench (callers, relay, heartbeats)": round((me_after - me) / wall, 2),
            "machine": round(((busy_after or 0.0) - (busy or 0.0)) / wall, 2),
        },
        "cores_per_100_rings_per_s": {
            "dispatcher": round(100 * cpu_s.get("dispatcher", 0.0) / len(rooms), 2),
            "services (roster, webhook-ingest, dispatcher)": round(100 * served / len(rooms), 2),
        },
        "load_average": os.getloadavg()[0],
    }


async def run(bench: Any, args: argparse.Namespace) -> dict[str, Any]:
    """The services and the stand-in, each a process, around this process's relay."""
    relay = Relay()
    hook = await relay.start()
    lk_port = free_port()
    lk = f"http://127.0.0.1:{lk_port}"
    keys = {"PINECALL_LIVEKIT_KEYS": f"production={KEY}:{SECRET}"}

    async def start(*command: str, **options: Any) -> str:
        url: str = await asyncio.to_thread(lambda: bench.start(*command, **options))
        return url

    urls = {"livekit": await start(
        "livekit",
        "lab", "livekit", "--port", str(lk_port), "--keys", f"{KEY}:{SECRET}",
        "--webhook", hook, "--offer-deadline", "3",
        port=lk_port, ready="",
    )}  # fmt: skip
    urls["roster"] = await start("roster", "roster", "serve", env={"LIVEKIT_URL": lk})
    urls["ingest"] = await start("webhook-ingest", "webhook-ingest", "serve", env=keys)
    relay.to(urls["ingest"])
    urls["dispatcher"] = await start(
        "dispatcher",
        "dispatcher",
        "serve",
        env=keys | {"PINECALL_SERVICE_KEY": bench.service_key},
    )
    try:
        return await measure(bench, args, relay, urls)
    finally:
        await relay.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rate", type=bounded(float, 0.1, 5000), default=50.0)
    parser.add_argument("--seconds", type=bounded(float, 0.1, 3600), default=20.0)
    parser.add_argument("--workers", type=bounded(int, 1, 10_000), default=20)
    parser.add_argument(
        "--hold", type=bounded(float, 0.1, 3600), default=3.0, help="seconds a caller stays"
    )
    parser.add_argument("--logs", default=None, help="copy the services' logs to this folder")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    base = Settings.from_env()
    with (
        ensure_platform(base.database_url, base.nats_url) as platform,
        bench_platform(platform) as bench,
    ):
        report = asyncio.run(run(bench, args))
        if args.logs:
            bench.stop_replicas()
            os.makedirs(args.logs, exist_ok=True)
            for name in bench.replicas:
                shutil.copy(bench.workdir / f"{name}.log", args.logs)
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"ring to offer at {report['rate_per_s']:.0f} rings/s for {report['seconds']:.0f} s:")
    print(
        table(
            ("rings", "offered", "missed", "p50 ms", "p95 ms", "p99 ms", "max ms"),
            [
                (
                    report["rings"],
                    report["offered"],
                    report["missed"],
                    *(report["ring_to_offer_ms"].get(p) for p in ("p50", "p95", "p99", "max")),
                )
            ],
        )
    )
    print("cpu (cores): " + ", ".join(f"{k} {v}" for k, v in report["cpu_cores"].items()))
    per = report["cores_per_100_rings_per_s"]
    print("cores per 100 rings/s: " + ", ".join(f"{k} {v}" for k, v in per.items()))


if __name__ == "__main__":
    main()
