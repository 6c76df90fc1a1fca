"""Test support for the worker, and for tests of other services that run one (no fixtures here:
they are in the tests' conftest). Imports no load lab.

- :func:`offer_call`: what the dispatcher does, a CreateDispatch to one worker's name whose
  metadata is a :class:`~pinecall_contracts.dispatch.JobOffer`;
- :class:`CallEvents`: the call log's ``call.opened`` / ``ended`` / ``sealed`` heard on NATS, so
  a test awaits them instead of polling;
- :func:`read_log`: a call's entries, as the log holds them;
- :func:`serving`: a :class:`~pinecall_worker.server.Worker` run until the block ends.

A worker in a process of its own (``pinecall-runtime worker start``, for a SIGKILL, a SIGSTOP, its
CPU) is the load lab's: :func:`pinecall_loadlab.scenarios.workerprocess.started`, which its
``lab run death`` experiment runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
from collections import defaultdict
from collections.abc import AsyncIterator
from typing import Any

import httpx
from livekit import api

from pinecall_contracts.base import decode, encode
from pinecall_contracts.calls import CallEvent, CallLog
from pinecall_contracts.dispatch import JobKind, JobOffer
from pinecall_contracts.ids import fleet_of
from pinecall_servicekit.bus import Bus
from pinecall_servicekit.lifecycle import ExitCode
from pinecall_worker.server import Worker


async def offer_call(
    lkapi: api.LiveKitAPI,
    worker: str,
    *,
    room: str,
    call: str,
    job: JobKind = "answer",
    written: int | None = None,
    agent: str = "support-bot",
    number: str | None = "+15550100",
    reoffer_at: dt.datetime | None = None,
) -> JobOffer:
    """Offer ``room`` to ``worker`` as the dispatcher does (CreateDispatch, JobOffer metadata);
    ``reoffer_at``: when the dispatcher would offer it again (None: a fresh offer's, 12 s on)."""
    offer = JobOffer(
        call=call,
        fleet=fleet_of(worker),
        environment="production",
        room=room,
        attempt=1,
        job=job,
        agent=agent,
        org="org_acme",
        number=number,
        written=written,
        arrived_at=dt.datetime.now(dt.UTC),
        reoffer_at=reoffer_at or dt.datetime.now(dt.UTC) + dt.timedelta(seconds=12),
    )
    await lkapi.agent_dispatch.create_dispatch(
        api.CreateAgentDispatchRequest(
            agent_name=worker, room=room, metadata=encode(offer).decode()
        )
    )
    return offer


class CallEvents:
    """Every ``call.<what>`` the call log says on NATS while open (:meth:`listening`)."""

    def __init__(self) -> None:
        self.heard: dict[tuple[str, str], CallEvent] = {}
        self._arrived: defaultdict[tuple[str, str], asyncio.Event] = defaultdict(asyncio.Event)

    @classmethod
    @contextlib.asynccontextmanager
    async def listening(cls, nats_url: str, namespace: str) -> AsyncIterator[CallEvents]:
        events = cls()
        bus = await Bus.connect(nats_url, namespace, name="worker-test")
        try:
            for what in ("opened", "ended", "sealed"):
                await bus.subscribe(bus.subjects.call_events(what), CallEvent, events._heard)
            await bus.client.flush()
            yield events
        finally:
            await bus.close()

    async def _heard(self, event: CallEvent) -> None:
        self.heard[(event.what, event.call)] = event
        self._arrived[(event.what, event.call)].set()

    async def wait(self, what: str, call: str) -> CallEvent:
        """The call's ``what`` event, once said (bound it with ``asyncio.timeout``)."""
        await self._arrived[(what, call)].wait()
        return self.heard[(what, call)]


async def read_log(url: str, key: str, call: str) -> CallLog:
    """``GET /v1/calls/{call}/entries``: the call's whole log."""
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        r = await http.get(f"/v1/calls/{call}/entries", headers={"Authorization": f"Bearer {key}"})
        r.raise_for_status()
        return decode(r.content, CallLog)


def kinds(log: CallLog) -> list[str]:
    return [e.kind for e in log.entries]


def of_kind(log: CallLog, kind: str) -> list[dict[str, Any]]:
    return [e.data for e in log.entries if e.kind == kind]


@contextlib.asynccontextmanager
async def serving(
    worker: Worker, *, within_s: float = 90.0
) -> AsyncIterator[asyncio.Task[ExitCode]]:
    """Run ``worker`` until the block ends (then stop it, as SIGTERM does); yields its run task,
    once LiveKit registered it. Each wait is bounded by ``within_s``."""
    running = asyncio.create_task(worker.run())
    try:
        async with asyncio.timeout(within_s):
            done, _ = await asyncio.wait(
                {running, asyncio.ensure_future(worker.registered.wait())},
                return_when=asyncio.FIRST_COMPLETED,
            )
            if running in done:
                running.result()
                raise RuntimeError("the worker stopped before LiveKit registered it")
        yield running
    finally:
        if not running.done():
            worker.stop()
        async with asyncio.timeout(within_s):
            await asyncio.gather(running, return_exceptions=True)
