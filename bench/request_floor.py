"""Where a call-log request's CPU goes, floor by floor: the server, the framework, the service's
own middleware, the Postgres client and the NATS client, each measured alone (issue 20).

Not a test. Each HTTP floor is a Granian process served exactly as a service is
(:func:`pinecall_servicekit.lifecycle.serve_http`: ASGI, uvloop, one worker), driven at ``--rate``
requests a second for ``--seconds`` by this process, its CPU read from ``/proc``:

* ``granian+asgi``: a bare ASGI callable answering a fixed JSON body (the server's floor);
* ``granian+litestar``: Litestar with that one route, no middleware, plugin or DTO;
* ``call-log /healthz``: a call-log replica's ``/healthz`` (everything a request of ours passes);
* ``call-log batch``: a two-entry batch of a writer (:mod:`bench.calllog_batches` does it alone).

Then, in this process, on the replica's database: the batch's transaction (``BEGIN``, the head's
one statement, ``COMMIT``) through SQLAlchemy's ``AsyncEngine`` as the store runs it, and through
psycopg alone; and one ``appended`` notice published on NATS. CPU of each is ``process_time`` over
``--ops`` operations.

    .venv/bin/python bench/request_floor.py
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import msgspec
import psutil
import psycopg
import uvloop
from benchkit import bounded

HERE = Path(__file__).resolve().parent
BODY = b'{"status":"ok"}'


# ------------------------------------------------------------------ the apps Granian serves


class Health(msgspec.Struct):
    """The floor's answer (at module level: Litestar reads the route's hints from here)."""

    status: str


def bare() -> Callable[..., Awaitable[None]]:
    """A bare ASGI app: every request answered 200 with :data:`BODY` (factory)."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": BODY})

    return app


def litestar() -> Any:
    """Litestar with one GET route and nothing else (factory)."""
    from litestar import Litestar, get

    @get("/healthz", sync_to_thread=False)
    def healthz() -> Health:
        return Health(status="ok")

    return Litestar(route_handlers=[healthz], logging_config=None, openapi_config=None)


# ------------------------------------------------------------------ measuring


def tree_cpu_s(pid: int) -> float:
    root = psutil.Process(pid)
    return sum(sum(p.cpu_times()[:2]) for p in [root, *root.children(recursive=True)])


async def drive(
    url: str, pid: int, rate: float, seconds: float, request: Callable[[httpx.AsyncClient], Any]
) -> float:
    """Send ``request`` ``rate`` times a second for ``seconds``; the server's CPU ms a request."""
    async with httpx.AsyncClient(base_url=url, timeout=30.0) as client:
        for _ in range(20):
            await request(client)
        loop = asyncio.get_running_loop()
        before, t0, n = tree_cpu_s(pid), loop.time(), int(rate * seconds)

        async def one(k: int) -> None:
            await asyncio.sleep(max(0.0, t0 + k / rate - loop.time()))
            await request(client)

        await asyncio.gather(*[one(k) for k in range(n)])
        return (tree_cpu_s(pid) - before) / n * 1000


def serve(factory: str, port: int) -> subprocess.Popen[bytes]:
    code = (
        "from pinecall_servicekit.lifecycle import serve_http; "
        f"serve_http({factory!r}, host='127.0.0.1', port={port}, keep_alive_s=620)"
    )
    return subprocess.Popen(
        [sys.executable, "-c", code], cwd=HERE, stdout=subprocess.DEVNULL, stderr=sys.stderr
    )


async def ready(url: str) -> None:
    async with httpx.AsyncClient(base_url=url) as client:
        for _ in range(600):
            try:
                if (await client.get("/healthz")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.1)
    raise RuntimeError(f"{url} never answered")


async def http_floors(args: argparse.Namespace) -> dict[str, float]:
    from pinecall_servicekit.platform import free_port

    out: dict[str, float] = {}
    for name, factory in (("granian+asgi", "request_floor:bare"), ("granian+litestar", "request_floor:litestar")):  # fmt: skip
        port = free_port()
        proc = serve(factory, port)
        try:
            await ready(f"http://127.0.0.1:{port}")
            out[name] = await drive(
                f"http://127.0.0.1:{port}", proc.pid, args.rate, args.seconds,
                lambda c: c.get("/healthz"),
            )  # fmt: skip
        finally:
            proc.terminate()
            proc.wait(30)
    return out


async def service_floors(args: argparse.Namespace, rig: Any) -> dict[str, float]:
    from calllog_batches import opening

    from pinecall_clients.calllog import CallLogClient

    out: dict[str, float] = {}
    pid = rig.procs[0].pid
    out["call-log /healthz"] = await drive(
        rig.urls[0], pid, args.rate, args.seconds, lambda c: c.get("/healthz")
    )
    async with CallLogClient(rig.urls[0], rig.key, request_timeout_s=30.0) as log:
        call = f"floor_{time.time_ns()}"
        await log.open(opening(call))
        writer = log.writer(call)

        async def batch(_: httpx.AsyncClient) -> None:
            writer.add("transcript.user", {"n": 0, "text": "I'd like to move my booking"})
            writer.add("transcript.agent", {"n": 1, "text": "Of course, which day?"})
            await writer.flush()

        out["call-log batch"] = await drive(rig.urls[0], pid, args.rate, args.seconds, batch)
    return out


async def client_floors(args: argparse.Namespace, rig: Any) -> dict[str, float]:
    """The batch's transaction through SQLAlchemy and through psycopg, and a NATS publish."""
    import nats
    from calllog_batches import opening

    from pinecall_call_log.store.head import WRITE_AT_HEAD, write_at_head
    from pinecall_clients.calllog import CallLogClient
    from pinecall_contracts.calls import Appended, Entry
    from pinecall_servicekit.bus import _headers
    from pinecall_servicekit.db import create_engine, driver_transaction
    from pinecall_servicekit.dburl import libpq_url

    async with CallLogClient(rig.urls[0], rig.key) as log:
        calls = [f"floorc_{k}_{time.time_ns()}" for k in range(3)]
        for call in calls:
            await log.open(opening(call))
    now = dt.datetime.now(dt.UTC)
    entries = [
        Entry(kind="transcript.user", data={"n": 0, "text": "I'd like to move my booking"}, ts=now),
        Entry(kind="transcript.agent", data={"n": 1, "text": "Of course, which day?"}, ts=now),
    ]
    digests = [b"d" * 32, b"e" * 32]
    out: dict[str, float] = {}

    engine = create_engine(
        rig.database_url, pool_size=2, max_overflow=0, pre_ping=False
    )  # as call-log
    after = 0

    async def via_sqlalchemy() -> None:
        nonlocal after
        async with engine.begin() as conn:
            params = {
                "call": calls[0], "after": after, "size": 2,
                "kinds": [e.kind for e in entries], "ts": [now, now],
                "data": [msgspec.json.encode(e.data).decode() for e in entries],
                "digests": digests,
            }  # fmt: skip
            assert (await conn.exec_driver_sql(WRITE_AT_HEAD, params)).first() is not None
        after += len(entries)

    async def via_store() -> None:
        nonlocal after
        async with driver_transaction(engine) as pg:
            assert await write_at_head(pg, calls[0], after, entries, digests, now) is not None
        after += len(entries)

    sql = WRITE_AT_HEAD
    raw = await psycopg.AsyncConnection.connect(libpq_url(rig.database_url))
    counts = [0, 0, 0]

    async def at_head(pg: psycopg.AsyncConnection[Any], k: int) -> None:
        """The batch's statement in ``pg``'s transaction, on call ``k``, after its count."""
        async with pg.transaction():
            params = {
                "call": calls[k], "after": counts[k], "size": 2,
                "kinds": [e.kind for e in entries], "ts": [now, now],
                "data": [msgspec.json.encode(e.data).decode() for e in entries],
                "digests": digests,
            }  # fmt: skip
            assert await (await pg.execute(sql, params, prepare=True)).fetchone() is not None
        counts[k] += 2

    async def via_psycopg() -> None:
        await at_head(raw, 1)

    async def via_pool_psycopg() -> None:
        # the engine's pool checks out the connection; psycopg runs the transaction
        async with engine.connect() as conn:
            pg = (await conn.get_raw_connection()).driver_connection
            assert pg is not None
            await at_head(pg, 2)

    nc = await nats.connect(os.environ.get("PINECALL_NATS_URL", "nats://127.0.0.1:4222"))
    notice = msgspec.json.encode(Appended(call=calls[0], last_seq=1))

    async def publish() -> None:
        await nc.publish(f"floor{os.getpid()}.appended.{calls[0]}", notice, headers=_headers())

    for name, op in (("sqlalchemy batch txn", via_sqlalchemy), ("store batch txn", via_store), ("psycopg batch txn", via_psycopg), ("pool + psycopg batch txn", via_pool_psycopg), ("nats publish", publish)):  # fmt: skip
        for _ in range(50):
            await op()
        cpu = time.process_time()
        for _ in range(args.ops):
            await op()
        out[name] = (time.process_time() - cpu) / args.ops * 1000
    await nc.close()
    await raw.close()
    await engine.dispose()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--rate", type=bounded(float, 0.1, 100_000), default=100.0, help="requests a second"
    )
    parser.add_argument("--seconds", type=bounded(float, 0.1, 3600), default=20.0)
    parser.add_argument("--ops", type=int, default=2000, help="operations of each client floor")
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    from pinecall_runtime.loadrig import loadavg, replicas
    from pinecall_servicekit.operator import OperatorSettings

    report: dict[str, Any] = {"loadavg_before": loadavg()}
    report |= uvloop.run(http_floors(args))
    with replicas(OperatorSettings.load(), 1, {}) as rig:
        report |= uvloop.run(service_floors(args, rig))
        report |= uvloop.run(client_floors(args, rig))
    report["loadavg_after"] = loadavg()
    print(
        json.dumps(
            {k: round(v, 3) if isinstance(v, float) else v for k, v in report.items()}, indent=1
        )
    )


if __name__ == "__main__":
    main()
