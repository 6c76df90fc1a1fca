"""The driver of ``pinecall-runtime load``: simulated workers writing golden calls (issue 5, "Load").

A simulated worker holds up to ``seats`` calls and one :class:`CallLogClient` (its own connection
pool), as a worker process does; workers take the replicas in turn. Each call opens (the opens
spread over ``ramp_s``), then on a fixed clock queues the entries the golden call owes by then
(2.1 a second) and flushes them as one batch every ``every_s`` seconds (``per_entry``: each entry
alone, when it is due). A worker's calls flush on its tick and their batches go through its
:class:`~pinecall_clients.relay.BatchRelay`, one request a tick, as a worker's job processes' go
through its relay socket (``pinecall_worker.relay``); ``alone``: each batch in a request of its
own, the wire before. One flush is in flight per writer, so a flush slower than the period makes
the next batch larger, as it would in a worker, and the offered entries stay 2.1 a second a call.
A call asks a tool now and then (nobody answers: it times out once, 0.2 s; its round trip is
counted apart from request latency), drains its writer, then seals.

The workers are shared out over ``drivers`` processes (:func:`drive_all`), so that one driver's
event loop is not what is measured: each records its requests' latencies, its CPU time and how late
its event loop woke (:attr:`Driven.lag`, the sign of a driver that cannot keep up).

Why workers: httpx's connection pool looks at every connection it holds on each request, so one
client holding thousands of connections costs the driver milliseconds a request (measured: 76 % of
a driver's CPU at 200 connections), which a worker of 32 seats never pays.
"""

from __future__ import annotations

import asyncio
import gc
import multiprocessing
import random
import secrets
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import uvloop

from pinecall_clients.calllog import CallLogClient
from pinecall_clients.errors import CallLogError
from pinecall_clients.relay import BatchRelay
from pinecall_contracts.calls import CallOpen, ToolCall

ENTRIES_PER_S = 2.1
"""The golden call's entries a second (seed 002)."""
LAG_TICK_S = 0.02
"""How often a driver checks how late its event loop wakes."""
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Plan:
    """What one driver process runs: the workers ``workers`` of ``calls`` calls in all."""

    urls: tuple[str, ...]
    key: str
    calls: int
    seats: int
    workers: tuple[int, ...]
    duration_s: float
    every_s: float
    per_entry: bool
    ramp_s: float
    step: int = 0
    """Names this run's calls apart from another step's on the same database."""
    alone: bool = False
    """Each call's batch as a request of its own (the wire before issue 20), not through its
    worker's relay."""


@dataclass(slots=True)
class Driven:
    """What one driver saw: latencies in seconds by kind (``open``, ``batch``, ``seal``), the
    calls it wrote (call id, entries written), its CPU seconds and event-loop lateness."""

    latencies: dict[str, list[float]] = field(
        default_factory=lambda: {"open": [], "batch": [], "seal": []}
    )
    calls: list[tuple[str, int]] = field(default_factory=list)
    entries: int = 0
    tools: int = 0
    errors: list[str] = field(default_factory=list)
    cpu_s: float = 0.0
    lag: list[float] = field(default_factory=list)
    sent: int = 0
    """Requests that carried batches to call-log (a worker's relay's, or each batch's own)."""

    async def timed(self, kind: str, what: Awaitable[T]) -> T:
        started = time.perf_counter()
        try:
            return await what
        finally:
            self.latencies[kind].append(time.perf_counter() - started)

    def merge(self, other: Driven) -> None:
        for kind, values in other.latencies.items():
            self.latencies[kind].extend(values)
        self.calls.extend(other.calls)
        self.entries += other.entries
        self.tools += other.tools
        self.errors.extend(other.errors)
        self.cpu_s += other.cpu_s
        self.lag.extend(other.lag)
        self.sent += other.sent


def quantile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile of ``values`` (nearest rank); 0.0 for none."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def worker_calls(plan: Plan, worker: int) -> range:
    """The call numbers worker ``worker`` holds."""
    return range(worker * plan.seats, min((worker + 1) * plan.seats, plan.calls))


def plans(
    urls: Sequence[str],
    key: str,
    *,
    calls: int,
    seats: int,
    drivers: int,
    duration_s: float,
    every_s: float,
    per_entry: bool,
    ramp_s: float,
    step: int = 0,
    alone: bool = False,
) -> list[Plan]:
    """The workers of ``calls`` calls (``seats`` each), shared out over ``drivers`` processes
    (fewer when there are fewer workers)."""
    workers = -(-calls // seats)
    return [
        Plan(
            urls=tuple(urls),
            key=key,
            calls=calls,
            seats=seats,
            workers=tuple(range(k, workers, drivers)),
            duration_s=duration_s,
            every_s=every_s,
            per_entry=per_entry,
            ramp_s=ramp_s,
            step=step,
            alone=alone,
        )
        for k in range(min(drivers, workers))
    ]


async def _call(
    i: int, client: CallLogClient, relay: BatchRelay | None, tick: float, plan: Plan, seen: Driven
) -> None:
    rng = random.Random(i)
    call = f"load_{plan.step}_{i}_{secrets.token_hex(3)}"
    loop = asyncio.get_running_loop()
    await asyncio.sleep(rng.uniform(0, plan.ramp_s))  # calls do not all arrive in one instant
    opened = CallOpen(
        call=call,
        agent="load-bot",
        org="org_load",
        environment="production",
        room=f"room-{call}",
        worker="pinecall/load.1791067258",
    )
    await seen.timed("open", client.open(opened))
    writer = client.writer(call, sender=relay)
    started = loop.time()
    period = 1 / ENTRIES_PER_S if plan.per_entry else plan.every_s
    # a worker's calls flush on its tick (the worker's ``record.tick_phase``), each alone on its own
    first = started + ((tick - started) % period if relay is not None else period)
    written, tools, beat = 0, 0, 0
    next_tool = started + rng.uniform(10, 40)
    while (due := first + beat * period) <= started + plan.duration_s:
        beat += 1
        await asyncio.sleep(max(0.0, due - loop.time()))  # the worker's clock, not a wait
        owed = int(ENTRIES_PER_S * (loop.time() - started) + 1e-9)
        for n in range(written, owed):
            writer.add("transcript.user", {"n": n, "text": "I'd like to move my booking"})
        written = max(written, owed)
        if writer.queued:
            if relay is None:
                seen.sent += 1
            await seen.timed("batch", writer.flush())
        if loop.time() >= next_tool:
            tools += 1
            await client.tool(call, ToolCall(id=f"tc{tools}", name="lookup", timeout_s=0.2))
            seen.tools += 1
            next_tool = loop.time() + rng.uniform(20, 60)
    if relay is None and writer.queued:  # the drain's batch, its own request
        seen.sent += 1
    await writer.drain()
    await seen.timed("seal", client.seal(call, "completed"))
    seen.entries += written
    seen.calls.append((call, written))
    if writer.refused:
        seen.errors.append(f"{call}: {len(writer.refused)} batches refused")


async def _worker(worker: int, client: CallLogClient, plan: Plan, seen: Driven) -> None:
    """A simulated worker's calls; their batches go through one relay, on one tick."""
    relay = None if plan.alone else BatchRelay(client)
    tick = random.Random(f"tick-{worker}").uniform(0, plan.every_s)
    try:
        await asyncio.gather(
            *[_call(i, client, relay, tick, plan, seen) for i in worker_calls(plan, worker)]
        )
    finally:
        if relay is not None:
            seen.sent += relay.requests
            await relay.aclose()


async def _lateness(lag: list[float]) -> None:
    loop = asyncio.get_running_loop()
    while True:
        due = loop.time() + LAG_TICK_S
        await asyncio.sleep(LAG_TICK_S)
        lag.append(loop.time() - due)


async def drive(plan: Plan, ready: Callable[[], Awaitable[None]] | None = None) -> Driven:
    """Run ``plan``'s workers to the end of their calls, in this event loop. Each worker's client
    is made first (an httpx client costs milliseconds to make) and opens a connection, and what is
    alive is frozen out of the garbage collector's walks; then ``ready()`` is awaited, and the CPU
    and the event loop's lateness are counted from there."""
    clients = {
        w: CallLogClient(plan.urls[w % len(plan.urls)], plan.key, request_timeout_s=30.0)
        for w in plan.workers
    }
    seen = Driven()
    try:
        # each worker's first connection open, and the client's first request (its lazy imports,
        # ~0.1 s in a new process) paid, as in a worker that has been running
        await asyncio.gather(*[c.http.get("/healthz") for c in clients.values()])
        gc.collect()
        gc.freeze()  # a full collection walks none of this: no pause of its own in the latencies
        if ready is not None:
            await ready()
        cpu = time.process_time()
        ticker = asyncio.create_task(_lateness(seen.lag))
        try:
            await asyncio.gather(*[_worker(w, clients[w], plan, seen) for w in plan.workers])
        finally:
            ticker.cancel()
        seen.cpu_s = time.process_time() - cpu
    finally:
        for client in clients.values():
            await client.aclose()
    return seen


READY = "ready"


def _process(plan: Plan, go: Any, results: Any) -> None:
    async def ready() -> None:
        results.put(READY)
        await asyncio.to_thread(go.wait)

    try:
        results.put(uvloop.run(drive(plan, ready)))  # the replicas' loop: a cheaper driver
    except BaseException as exc:  # said to the parent, which reports it; never a hang
        results.put(f"{type(exc).__name__}: {exc}")
        raise


def drive_all(
    plans: Sequence[Plan], *, deadline_s: float, started: Callable[[], None] | None = None
) -> Driven:
    """Run each plan in a process of its own, all let go at once; their findings merged.

    ``started()``, when given, is called once every driver is ready, just before they are let go
    (the caller reads CPU counters there). Raises ``RuntimeError`` when a driver fails, and
    ``queue.Empty`` when one says nothing for ``deadline_s``.
    """
    ctx = multiprocessing.get_context("spawn")
    go = ctx.Event()
    results = ctx.Queue()
    procs = [ctx.Process(target=_process, args=(p, go, results), daemon=True) for p in plans]
    for p in procs:
        p.start()
    try:
        for _ in procs:
            if (said := results.get(timeout=deadline_s)) != READY:
                raise RuntimeError(f"a driver failed: {said}")
        if started is not None:
            started()
        go.set()
        seen = Driven()
        for _ in procs:
            got = results.get(timeout=deadline_s)
            if isinstance(got, str):
                raise RuntimeError(f"a driver failed: {got}")
            seen.merge(got)
        return seen
    finally:
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()


VERIFY_WITHIN_S = 60.0
"""A log read back is asked again this long while call-log gives no answer (or a 5xx)."""


async def verify(url: str, key: str, calls: Sequence[tuple[str, int]]) -> list[str]:
    """Read every call's log back: the writer's entries once each, in order, and sealed. Returns
    what is wrong (nothing, when every log holds)."""
    limit = asyncio.Semaphore(32)
    async with CallLogClient(url, key, request_timeout_s=60.0) as client:

        async def one(call: str, written: int) -> str | None:
            async with limit:
                try:
                    log = await client.entries(call, within_s=VERIFY_WITHIN_S)
                except CallLogError as exc:
                    return f"{call}: {exc.status or 'no answer'} reading its log ({exc})"
            counted = [e.data["n"] for e in log.entries if e.counted is not None]
            seqs = [e.seq for e in log.entries]
            if counted != list(range(written)) or seqs != list(range(1, len(seqs) + 1)):
                return f"{call}: the log does not hold the writer's {written} entries once each"
            return None if log.state == "sealed" else f"{call}: not sealed"

        found = await asyncio.gather(*[one(call, written) for call, written in calls])
    return [f for f in found if f is not None]
