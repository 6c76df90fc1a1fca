"""The chain's workers: real ``Worker``s whose machine can vanish, and heartbeats of pretend ones.

A real worker is an unmodified ``pinecall_worker.server.Worker`` with a light entrypoint
(``answer_and_hold``: the job joins its lab room as the agent) on the THREAD executor, heartbeating
to the chain's roster through a transport that :meth:`LabWorker.vanish` cuts: LiveKit keeps its
socket (a ghost), the roster hears nothing, as when a machine disappears.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx
from livekit.agents import JobExecutorType

from pinecall_contracts.base import encode
from pinecall_contracts.fleet import WorkerHeartbeat
from pinecall_loadlab.livekit import StandIn
from pinecall_loadlab.livekit import events as ev
from pinecall_loadlab.livekit.labagents import answer_and_hold
from pinecall_servicekit.testing.apps import Replica
from pinecall_worker.server import Worker
from pinecall_worker.settings import WorkerSettings

if TYPE_CHECKING:
    from pinecall_loadlab.scenarios.chain import ChainConfig


class Cuttable(httpx.AsyncBaseTransport):
    """A transport that fails every request once cut, as a vanished machine's would."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner
        self.cut = False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self.cut:
            raise httpx.ConnectError("the machine is gone", request=request)
        return await self.inner.handle_async_request(request)


@dataclass(kw_only=True)
class LabWorker:
    """A real worker of the chain."""

    worker: Worker
    task: asyncio.Task[Any]
    transport: Cuttable
    lk: StandIn

    @property
    def name(self) -> str:
        return self.worker.name

    @property
    def worker_id(self) -> str:
        [registered] = self.lk.events.of(ev.WorkerRegistered, lambda e: e.agent_name == self.name)
        return registered.worker_id

    def vanish(self) -> None:
        """The machine is gone: LiveKit keeps its socket (a ghost), the roster hears nothing."""
        self.lk.freeze(self.worker_id)
        self.transport.cut = True


def start_worker(
    lk: StandIn,
    roster: Replica,
    config: ChainConfig,
    *,
    host: str,
    seats: int,
    fleet: str,
    fleet_key: str,
    measures: str,
) -> LabWorker:
    """Start a real worker ``<fleet>/<host>.<now>`` of ``seats`` (await its ``registered``)."""
    settings = WorkerSettings.from_env(
        {},
        fleet=fleet,
        fleet_key=fleet_key,
        max_jobs=seats,
        worker_host=host,
        livekit_url=lk.url,
        livekit_api_key=config.api_key,
        livekit_api_secret=config.api_secret,
        heartbeat_s=config.heartbeat_s,
        drain_timeout_s=1,
        # its jobs hold rooms and write no log: the seal of what a drain leaves has no call-log
        # to reach, and its 30 s of retries would only hold up the chain's close
        seal_timeout_s=1,
        measures_socket=measures,
        health_port=0,  # several workers share this process: each probe on a port of its own
    )
    transport = Cuttable(httpx.ASGITransport(app=roster.app))  # type: ignore[arg-type]
    client = httpx.AsyncClient(transport=transport, base_url="http://roster.lab")
    worker = Worker(
        settings,
        answer_and_hold,
        roster=client,
        executor=JobExecutorType.THREAD,
        num_idle_processes=2,
        start=int(time.time()),
    )
    task = asyncio.create_task(worker.run(), name=f"worker-{host}")
    return LabWorker(worker=worker, task=task, transport=transport, lk=lk)


def beat_forever(
    roster: httpx.AsyncClient, heartbeat: WorkerHeartbeat, key: str, every_s: float
) -> Coroutine[Any, Any, None]:
    """Post ``heartbeat`` every ``every_s`` until cancelled (a pretend worker's)."""
    headers = {"authorization": f"Bearer {key}", "content-type": "application/json"}

    async def beat() -> None:
        while True:
            await roster.post("/v1/fleet/heartbeat", content=encode(heartbeat), headers=headers)
            await asyncio.sleep(every_s)  # a heartbeat's cadence

    return beat()
