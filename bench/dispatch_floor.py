"""What a ring costs the dispatcher, floor by floor: each kind of round trip it makes, measured
alone on the client's side, times how many of each a ring makes (issue 20, "≤ 2 ms of CPU a
ring").

Not a test. In this process (uvloop, as the dispatcher runs), against the LiveKit stand-in (a
process of its own, ``lab livekit``) and the machine's NATS (or an embedded one), ``--ops`` times
each:

* ``twirp``: one Twirp call through the dispatcher's own LiveKit client
  (:class:`pinecall_clients.livekit.LiveKit`, livekit-api underneath: the room's token, signed
  once a room (``pinecall_clients.roomtokens``; it was signed each call before), protobuf
  encoded, an aiohttp request, the answer decoded) — ListDispatch of a room;
* ``jwt``: one token signed (``AccessToken.to_jwt`` alone): once a room now, once a call before;
* ``jetstream``: one JetStream message pulled and acked by a durable consumer, one fetch a
  message as the dispatcher's consumer takes them (what each webhook event costs the dispatcher
  before its handler: the pull request's write, the message, the ack's write).

* ``statement``: one statement committed by itself on the pool's psycopg connection
  (:func:`pinecall_servicekit.db.driver_connection` on the autocommit engine), as the dispatcher
  writes a room's transition and a confirmation: an ``UPDATE … RETURNING`` of one row of a
  scratch table;
* ``transaction``: the same statement between ``BEGIN`` and ``COMMIT``
  (:func:`~pinecall_servicekit.db.driver_transaction`), as the fleet's locked transaction starts;
* ``sqlalchemy``: the same transaction through SQLAlchemy's ``AsyncEngine``, as every one of them
  ran before (the reference).

It prints each floor in ms of CPU and the sum for what a ring makes today (``--twirps``,
``--transactions``, ``--statements``, ``--messages``: 4, 1, 5 and 4: ListDispatch,
ListParticipants, CreateDispatch, DeleteDispatch at the hang-up; the fleet's transaction (its lock,
then the seats promised and the ring kept, two statements more), the dispatch confirmed, the
hang-up, the room finished; the webhooks room_started, participant_joined, participant_left and
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
from pinecall_servicekit.stream import fetch_one

KEY, SECRET = "floor-key", "floor-secret-of-at-least-32-characters"
ROOMS = 50
SCRATCH = "floor_rooms"
"""A temporary table (the engine's one connection's own: nothing is left behind)."""


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
    settings = Settings()
    with ensure_platform(settings.database_url, settings.nats_url) as platform:
        out["jetstream"] = await jetstream(args, platform.nats_url)
        out |= await postgres(args, platform.database_url)
    return out


async def postgres(args: argparse.Namespace, database_url: str) -> dict[str, float]:
    """One row's update alone, in a transaction on psycopg, and through SQLAlchemy."""
    import sqlalchemy as sa

    from pinecall_servicekit import db

    engine = db.create_engine(database_url, pool_size=1, max_overflow=0, pre_ping=False)
    alone = db.autocommit(engine)
    sql = f"UPDATE {SCRATCH} SET n = n + 1 WHERE k = %(k)s RETURNING k, n"
    try:
        async with engine.begin() as conn:
            await conn.execute(sa.text(f"CREATE TEMP TABLE {SCRATCH} (k int PRIMARY KEY, n int)"))
            await conn.execute(
                sa.text(f"INSERT INTO {SCRATCH} SELECT k, 0 FROM generate_series(0, 49) k")
            )

        async def statement(k: int) -> None:
            async with db.driver_connection(alone) as pg:
                await (await pg.execute(sql, {"k": k % 50})).fetchall()

        async def transaction(k: int) -> None:
            async with db.driver_transaction(engine) as pg:
                await (await pg.execute(sql, {"k": k % 50})).fetchall()

        table = sa.table(SCRATCH, sa.column("k"), sa.column("n"))
        through = (
            sa.update(table)
            .where(table.c.k == sa.bindparam("key"))
            .values(n=table.c.n + 1)
            .returning(table.c.k, table.c.n)
        )

        async def sqlalchemy(k: int) -> None:
            async with engine.begin() as conn:
                (await conn.execute(through, {"key": k % 50})).all()

        return {
            "statement": await cpu_ms(args.ops, statement),
            "transaction": await cpu_ms(args.ops, transaction),
            "sqlalchemy": await cpu_ms(args.ops, sqlalchemy),
        }
    finally:
        await engine.dispose()


async def jetstream(args: argparse.Namespace, nats_url: str) -> float:
    """A message pulled and acked by a durable consumer, as ``pinecall_servicekit.stream``
    consumes: one fetch a message (:func:`~pinecall_servicekit.stream.fetch_one`: a pull
    request, the message), then its ack."""
    nc = await nats.connect(nats_url)
    js = nc.jetstream()
    stream, subject = f"floor{os.getpid()}", f"floor{os.getpid()}.events"
    try:
        await js.add_stream(name=stream, subjects=[subject])
        body = b"x" * 600  # a webhook event's size
        for _ in range(args.ops + 100):
            await js.publish(subject, body)
        config = ConsumerConfig(durable_name="floor", ack_policy=AckPolicy.EXPLICIT)
        sub = await js.pull_subscribe(subject, durable="floor", config=config)

        async def one(_: int) -> None:
            msg = await fetch_one(sub, timeout_s=5)
            assert msg is not None
            await msg.ack()

        return await cpu_ms(args.ops, one)
    finally:
        await js.delete_stream(stream)
        await nc.close()


def report(measured: dict[str, float], args: argparse.Namespace) -> dict[str, Any]:
    """The floors, what a ring's round trips sum to today, and what the same transactions and
    statements cost when each was a transaction through SQLAlchemy (before issue 20's change)."""
    others = args.twirps * measured["twirp"] + args.messages * measured["jetstream"]
    today = others + args.transactions * measured["transaction"]
    today += args.statements * measured["statement"]
    before = others + (args.transactions + args.statements) * measured["sqlalchemy"]
    return {
        "floor_ms": {k: round(v, 3) for k, v in measured.items()},
        "a_ring": {
            "twirps": args.twirps,
            "transactions": args.transactions,
            "statements": args.statements,
            "messages": args.messages,
        },
        "ring_floor_ms": round(today, 2),
        "ring_floor_through_sqlalchemy_ms": round(before, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    count = bounded(int, 0, 100)
    parser.add_argument("--ops", type=bounded(int, 1, 1_000_000), default=2000, help="each floor's")
    parser.add_argument("--twirps", type=count, default=4, help="Twirp calls a ring makes")
    parser.add_argument("--transactions", type=count, default=1, help="transactions a ring opens")
    parser.add_argument(
        "--statements", type=count, default=5, help="statements a ring makes besides each first"
    )
    parser.add_argument("--messages", type=count, default=4, help="JetStream messages a ring makes")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    out = report(uvloop.run(floors(args)), args)
    if args.json:
        print(json.dumps(out))
        return
    ms = out["floor_ms"]
    print(
        f"twirp call (client's CPU): {ms['twirp']} ms; a token signed {ms['jwt']} ms, once a room"
    )
    print(f"jetstream message pulled and acked: {ms['jetstream']} ms")
    print(
        f"a statement alone on psycopg: {ms['statement']} ms; in a transaction of its own:"
        f" {ms['transaction']} ms; that transaction through SQLAlchemy: {ms['sqlalchemy']} ms"
    )
    print(
        f"a ring ({args.twirps} twirp, {args.transactions} transactions, {args.statements} more"
        f" statements, {args.messages} messages): {out['ring_floor_ms']} ms; each a transaction"
        f" through SQLAlchemy: {out['ring_floor_through_sqlalchemy_ms']} ms"
    )


if __name__ == "__main__":
    main()
