"""What an HTTP request costs the asker's CPU, client by client (issue 20): the load's drivers,
which are the workers' writer, spent more than half their samples in httpx's own pool (httpcore).

Not a test. One Granian process serves a bare ASGI app as a service is served
(``request_floor.py``'s ``bare``); this process then POSTs a two-entry batch's body ``--ops``
times through each client, one request at a time and ``--concurrency`` at once, and prints the
client's CPU a request (``process_time``) and the requests a second:

* ``httpx``: httpx's ``AsyncClient`` on its own pool, as every client of ours was;
* ``httpx on aiohttp``: :func:`pinecall_clients.http.client`, httpx's API on aiohttp's pool (the
  service clients' since issue 20);
* ``aiohttp``: aiohttp's ``ClientSession`` alone, the floor under both.

    .venv/bin/python bench/http_client.py [--ops 3000] [--concurrency 30] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import httpx
import uvloop
from benchkit import bounded, log
from request_floor import ready, serve

BODY = json.dumps(
    {
        "after": 0,
        "entries": [
            {"kind": "transcript.user", "data": {"n": 0, "text": "I'd like to move my booking"}},
            {"kind": "transcript.agent", "data": {"n": 1, "text": "Of course, which day?"}},
        ],
    }
).encode()
HEADERS = {"content-type": "application/json", "Authorization": "Bearer pck_bench"}


async def measure(send: Callable[[], Awaitable[None]], ops: int, concurrency: int) -> list[float]:
    """``[client CPU ms a request, requests a second]`` over ``ops`` sends, ``concurrency`` at
    once (after 50 unmeasured, which open the connections)."""
    for _ in range(50):
        await send()

    async def sender(n: int) -> None:
        for _ in range(n):
            await send()

    cpu, wall = time.process_time(), time.perf_counter()
    await asyncio.gather(*(sender(ops // concurrency) for _ in range(concurrency)))
    done = ops // concurrency * concurrency
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return [round(cpu / done * 1000, 3), round(done / wall)]


def via_aiohttp(url: str) -> tuple[Callable[[], Awaitable[None]], Callable[[], Awaitable[Any]]]:
    """``(send, close)`` of aiohttp's ``ClientSession`` alone."""
    session = aiohttp.ClientSession(url)

    async def send() -> None:
        async with session.post("/batch", data=BODY, headers=HEADERS) as response:
            await response.read()

    return send, session.close


def via_httpx(
    http: httpx.AsyncClient,
) -> tuple[Callable[[], Awaitable[None]], Callable[[], Awaitable[Any]]]:
    """``(send, close)`` of an ``httpx.AsyncClient`` (on whichever pool it was made with)."""

    async def send() -> None:
        (await http.post("/batch", content=BODY)).read()

    return send, http.aclose


async def clients(url: str, ops: int, concurrency: int) -> dict[str, dict[str, list[float]]]:
    from pinecall_clients.http import client

    made = {
        "httpx": lambda: via_httpx(httpx.AsyncClient(base_url=url, headers=HEADERS)),
        "httpx on aiohttp": lambda: via_httpx(client(url, headers=HEADERS)),
        "aiohttp": lambda: via_aiohttp(url),
    }
    out: dict[str, dict[str, list[float]]] = {}
    for name, make in made.items():
        log(name)
        send, close = make()
        try:
            out[name] = {
                "one at a time": await measure(send, ops, 1),
                f"{concurrency} at once": await measure(send, ops, concurrency),
            }
        finally:
            await close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--ops", type=bounded(int, 100, 1_000_000), default=3000, help="requests a client"
    )
    parser.add_argument(
        "--concurrency", type=bounded(int, 1, 1000), default=30, help="requests at once"
    )
    parser.add_argument("--json", action="store_true", help="print JSON, not a table")
    args = parser.parse_args()
    from pinecall_runtime.loadrig import loadavg
    from pinecall_servicekit.platform import free_port

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = serve("request_floor:bare", port)
    try:
        uvloop.run(ready(url))
        before = loadavg()
        out = uvloop.run(clients(url, int(args.ops), int(args.concurrency)))
    finally:
        server.terminate()
        server.wait(30)
    if args.json:
        print(json.dumps({"loadavg_before": before, "clients": out}, indent=1))
        return
    print(f"load average before: {before}")
    print(f"{'client':<18} {'requests at once':>16} {'CPU ms a request':>17} {'requests/s':>11}")
    for name, runs in out.items():
        for how, (ms, rate) in runs.items():
            print(f"{name:<18} {how:>16} {ms:>17.3f} {rate:>11.0f}")


if __name__ == "__main__":
    main()
