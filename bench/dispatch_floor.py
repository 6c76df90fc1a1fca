"""What a ring costs the dispatcher, floor by floor: each kind of round trip it makes, measured
alone on the client's side, times how many of each a ring makes (issue 20, "≤ 2 ms of CPU a
ring").

Not a test. In this process (uvloop, as the dispatcher runs), against the LiveKit stand-in (a
process of its own, ``lab livekit``) and the machine's NATS (or an embedded one), ``--ops`` times
each:

* ``twirp``: one Twirp call through the dispatcher's own LiveKit client
  (:class:`pinecall_clients.livekit.LiveKit`, livekit-api underneath: a JWT signed, protobuf
  encoded, an aiohttp request, the answer decoded) — ListDispatch of a room;
* ``twirp, no JWT``: the JWT's share of it (``AccessToken.to_jwt`` alone);
* ``jetstream``: one JetStream message pulled and acked by a durable consumer (what each webhook
  event costs the dispatcher before its handler: nats-py's fetch, the ack's write).

The transaction's floors are ``bench/request_floor.py``'s (one ``BEGIN``, a statement,
``COMMIT``: 0.92 ms of CPU through SQLAlchemy's ``AsyncEngine``, 0.38 through psycopg alone).
It prints each floor in ms of CPU and the sum for what a ring makes today (``--twirps``,
``--transactions``, ``--messages``: 4, 4 and 4: ListDispatch, ListParticipants, CreateDispatch,
DeleteDispatch at the hang-up; the ring kept and offered, the dispatch confirmed, the hang-up,
the room finished; the webhooks room_started, participant_joined, participant_left and
room_finished).

    .venv/bin/python bench/dispatch_floor.py [--ops 2000] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import nats
import uvloop
from benchkit import bounded
from livekit import api
from nats.js.api import AckPolicy, ConsumerConfig

from pinecall_clients.livekit import LiveKit, LiveKitAccess
from pinecall_servicekit.platform import ensure_platform, free_port
from pinecall_servicekit.settings import Settings

KEY, SECRET = "floor-key", "floor-secret-of-at-least-32-characters"
ROOMS = 50
TRANSACTION_MS = {"sqlalchemy": 0.92, "psycopg": 0.38}
"""``bench/request_floor.py``'s transaction floors (bench/README.md, 2026-12-04)."""


async def cpu_ms(ops: int, one: Callable[[int], Awaitable[object]]) -> float:
    """Milliseconds of this process's CPU an operation, over ``ops`` of them one after another."""
    for k in range(min(50, ops)):  # warm: connections, caches
        await one(k)
    start = time.process_time()
    for k in range(ops):
        await one(k)
    return 1000 * (time.process_time() - start) / ops


def stand_in(port: int) -> subprocess.Popen[bytes]:
    """``lab livekit`` on ``port`` (its own process)."""
    command = [sys.executable, "-m", "pinecall_runtime", "lab", "livekit", "--port", str(port)]
    return subprocess.Popen(
        [*command, "--keys", f"{KEY}:{SECRET}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


async def answering(url: str) -> None:
    """Once the stand-in at ``url`` answers a Twirp call (10 s at most)."""
    async with api.LiveKitAPI(url, KEY, SECRET) as lk:
        for _ in range(200):
            try:
                await lk.room.list_rooms(api.ListRoomsRequest())
                return
            except Exception:  # not listening yet
                await asyncio.sleep(0.05)
    raise SystemExit("the stand-in did not answer")


async def floors(args: argparse.Namespace) -> dict[str, float]:
    port = free_port()
    process = stand_in(port)
    out: dict[str, float] = {}
    try:
        await answering(f"http://127.0.0.1:{port}")
        access = LiveKitAccess(url=f"http://127.0.0.1:{port}", api_key=KEY, api_secret=SECRET)
        async with api.LiveKitAPI(access.url, KEY, SECRET) as made:
            for k in range(ROOMS):
                await made.room.create_room(api.CreateRoomRequest(name=f"room-{k}"))
        async with LiveKit(access) as lk:
            out["twirp"] = await cpu_ms(args.ops, lambda k: lk.dispatches(f"room-{k % ROOMS}"))
        grants = api.VideoGrants(room_admin=True, room="room-1")

        async def jwt(_: int) -> str:
            return api.AccessToken(KEY, SECRET).with_grants(grants).to_jwt()

        out["jwt"] = await cpu_ms(args.ops, jwt)
    finally:
        process.terminate()
        await asyncio.to_thread(process.wait, 5)
    out["jetstream"] = await jetstream(args)
    return out


async def jetstream(args: argparse.Namespace) -> float:
    """A message pulled and acked by a durable consumer, as ``pinecall_servicekit.stream``
    consumes (a batch fetched, each acked on its own)."""
    settings = Settings()
    with ensure_platform(settings.database_url, settings.nats_url) as platform:
        nc = await nats.connect(platform.nats_url)
        try:
            js = nc.jetstream()
            stream, subject = f"floor{os.getpid()}", f"floor{os.getpid()}.events"
            await js.add_stream(name=stream, subjects=[subject])
            try:
                body = b"x" * 600  # a webhook event's size
                for _ in range(args.ops + 100):
                    await js.publish(subject, body)
                config = ConsumerConfig(durable_name="floor", ack_policy=AckPolicy.EXPLICIT)
                sub = await js.pull_subscribe(subject, durable="floor", config=config)
                batch: list[Any] = []

                async def one(_: int) -> None:
                    if not batch:
                        batch.extend(await sub.fetch(32, timeout=5))
                    await batch.pop(0).ack()

                return await cpu_ms(args.ops, one)
            finally:
                await js.delete_stream(stream)
        finally:
            await nc.close()


def report(measured: dict[str, float], args: argparse.Namespace) -> dict[str, Any]:
    """The floors and what a ring's round trips sum to, through SQLAlchemy and psycopg alone."""
    rings = {
        via: args.twirps * measured["twirp"]
        + args.transactions * ms
        + args.messages * measured["jetstream"]
        for via, ms in TRANSACTION_MS.items()
    }
    return {
        "twirp_ms": round(measured["twirp"], 3),
        "jwt_ms": round(measured["jwt"], 3),
        "jetstream_ms": round(measured["jetstream"], 3),
        "transaction_ms": TRANSACTION_MS,
        "a_ring": {
            "twirps": args.twirps,
            "transactions": args.transactions,
            "messages": args.messages,
        },
        "ring_floor_ms": {via: round(ms, 2) for via, ms in rings.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    count = bounded(int, 0, 100)
    parser.add_argument("--ops", type=bounded(int, 1, 1_000_000), default=2000, help="each floor's")
    parser.add_argument("--twirps", type=count, default=4, help="Twirp calls a ring makes")
    parser.add_argument("--transactions", type=count, default=4, help="transactions a ring makes")
    parser.add_argument("--messages", type=count, default=4, help="JetStream messages a ring makes")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    out = report(uvloop.run(floors(args)), args)
    if args.json:
        print(json.dumps(out))
        return
    print(f"twirp call (client's CPU): {out['twirp_ms']} ms, of which its JWT {out['jwt_ms']} ms")
    print(f"jetstream message pulled and acked: {out['jetstream_ms']} ms")
    print(f"transaction (request_floor.py): {TRANSACTION_MS} ms")
    print(
        f"a ring ({args.twirps} twirp, {args.transactions} transactions, {args.messages}"
        f" messages): {out['ring_floor_ms']['sqlalchemy']} ms through SQLAlchemy,"
        f" {out['ring_floor_ms']['psycopg']} ms through psycopg alone"
    )


if __name__ == "__main__":
    main()
