"""The chain's workers: real ``Worker``s whose machine can vanish, real worker processes that
can be killed or frozen, and heartbeats of pretend ones.

A real worker is an unmodified ``pinecall_worker.server.Worker`` with a light entrypoint
(``answer_and_hold``: the job joins its lab room as the agent) on the THREAD executor, heartbeating
to the chain's roster through a transport that :meth:`LabWorker.vanish` cuts: LiveKit keeps its
socket (a ghost), the roster hears nothing, as when a machine disappears.

A worker process (:func:`start_process`) is ``pinecall-runtime worker start`` itself
(:func:`.workerprocess.started`): the PROCESS executor, the real call (the ``answer`` job on the
vendor fakes, the ``sentence`` job), reaching the chain's roster and call-log over loopback HTTP.
A SIGKILL or a SIGSTOP needs one. Both kinds take their settings from :func:`settings_for`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
from livekit.agents import JobExecutorType

from pinecall_clients.errors import RosterError
from pinecall_clients.roster import RosterClient
from pinecall_contracts.fleet import WorkerHeartbeat
from pinecall_loadlab.livekit import StandIn
from pinecall_loadlab.livekit import events as ev
from pinecall_loadlab.livekit.labagents import answer_and_hold
from pinecall_loadlab.scenarios.workerprocess import WorkerProcess, started
from pinecall_loadlab.vendors import VendorFakes
from pinecall_servicekit.platform import free_port
from pinecall_servicekit.testing.apps import Replica
from pinecall_worker.server import Worker
from pinecall_worker.settings import WorkerSettings

if TYPE_CHECKING:
    from pinecall_loadlab.scenarios.chain import Chain, ChainConfig


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

    def mute(self) -> None:
        """LiveKit keeps its socket and offers it jobs that never reach it (a ghost), and nothing
        the worker tries reaches LiveKit again; the roster still hears it."""
        self.lk.freeze(self.worker_id)
        self.lk.hang_link(self.name, 3600.0)

    def vanish(self) -> None:
        """The machine is gone: LiveKit keeps its socket (a ghost), the roster hears nothing,
        and nothing the process tries reaches LiveKit again (its worker gives a silent LiveKit
        up in 3 s and reconnects, which a machine that is gone never does: its registers are
        held unanswered for an hour)."""
        self.mute()
        self.transport.cut = True


def settings_for(
    lk: StandIn,
    config: ChainConfig,
    *,
    host: str,
    seats: int,
    fleet: str,
    fleet_key: str,
    measures: str,
    **more: Any,
) -> WorkerSettings:
    """A lab worker's settings: ``<fleet>/<host>.<start>`` of ``seats`` on the stand-in, a drain
    of 1 s (the chain closes fast), ``more`` on top."""
    return WorkerSettings.from_env(
        {},
        **{
            "fleet": fleet,
            "fleet_key": fleet_key,
            "max_jobs": seats,
            "worker_host": host,
            "livekit_url": lk.url,
            "livekit_api_key": config.api_key,
            "livekit_api_secret": config.api_secret,
            "heartbeat_s": config.heartbeat_s,
            "drain_timeout_s": 1,
            "measures_socket": measures,
            "log_level": config.log_level,
            "log_format": "text",
        }
        | more,
    )


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
    settings = settings_for(
        lk,
        config,
        host=host,
        seats=seats,
        fleet=fleet,
        fleet_key=fleet_key,
        measures=measures,
        # its jobs hold rooms and write no log: the seal of what a drain leaves has no call-log
        # to reach, and its 30 s of retries would only hold up the chain's close
        seal_timeout_s=1,
        health_port=0,  # several workers share this process: each probe on a port of its own
    )
    transport = Cuttable(roster.transport)
    worker = Worker(
        settings,
        answer_and_hold,
        roster_transport=transport,
        executor=JobExecutorType.THREAD,
        num_idle_processes=2,
        start=int(time.time()),
    )
    task = asyncio.create_task(worker.run(), name=f"worker-{host}")
    return LabWorker(worker=worker, task=task, transport=transport, lk=lk)


def beat_forever(
    roster: Replica, heartbeat: WorkerHeartbeat, key: str, every_s: float
) -> Coroutine[Any, Any, None]:
    """Post ``heartbeat`` every ``every_s`` until cancelled (a pretend worker's), as a worker
    does: through the roster's client, an answer or none alike."""

    async def beat() -> None:
        async with RosterClient(
            key, base_url="http://roster.lab", transport=roster.transport
        ) as client:
            while True:
                with contextlib.suppress(RosterError):
                    await client.heartbeat(heartbeat, timeout_s=every_s)
                await asyncio.sleep(every_s)  # a heartbeat's cadence

    return beat()


@dataclass(kw_only=True)
class ProcessWorker:
    """A worker process of the chain (:func:`start_process`)."""

    process: WorkerProcess
    name: str
    worker_id: str

    def kill(self) -> None:
        """SIGKILL the worker (its job processes then exit, their connections lost)."""
        self.process.kill()

    def freeze(self) -> None:
        """SIGSTOP it whole, job processes too: LiveKit keeps its socket (a ghost), the roster
        hears nothing, its rooms' connections stop answering."""
        self.process.freeze()


def call_settings(
    chain: Chain,
    *,
    host: str,
    seats: int,
    vendors: VendorFakes,
    fleet: str = "pinecall",
    environment: str = "production",
    **more: Any,
) -> WorkerSettings:
    """The settings of a worker of the chain that runs the real call: ``settings_for`` with the
    chain's call-log, lab rooms and ``vendors``' URLs (``more`` on top)."""
    if "call-log" not in chain.urls:
        raise ValueError("a worker of the real call writes its calls: give the chain a call-log")
    real_call: dict[str, Any] = {
        "seal_timeout_s": 10,
        "call_log_url": chain.urls["call-log"],
        "lab_rooms": True,
        "deepgram_url": vendors.deepgram_url,
        "anthropic_url": vendors.anthropic_url,
        "cartesia_url": vendors.cartesia_url,
        "deepgram_api_key": "lab",
        "anthropic_api_key": "lab",
        "cartesia_api_key": "lab",
    }
    return settings_for(
        chain.lk,
        chain.config,
        host=host,
        seats=seats,
        fleet=fleet,
        fleet_key=chain.config.fleet_keys[environment],
        measures=os.path.join(chain.tmp, f"{host}.sock"),
        **(real_call | more),
    )


async def start_process(
    chain: Chain,
    stack: contextlib.AsyncExitStack,
    *,
    host: str,
    seats: int,
    vendors: VendorFakes,
    fleet: str = "pinecall",
    environment: str = "production",
    within_s: float = 180.0,
    **more: Any,
) -> ProcessWorker:
    """Start ``pinecall-runtime worker start`` as ``<fleet>/<host>.<start>`` with ``seats``, the
    real call on ``vendors``, stopped when ``stack`` closes; returns once LiveKit registered it
    and every dispatcher replica heard the roster say so. ``more`` are its other settings."""
    settings = call_settings(
        chain,
        host=host,
        seats=seats,
        vendors=vendors,
        fleet=fleet,
        environment=environment,
        health_port=free_port(),
        roster_url=chain.urls["roster"],
        **more,
    )
    output = Path(chain.tmp) / f"{host}.log"
    process = await stack.enter_async_context(started(settings, output=output, within_s=within_s))
    [registered] = chain.lk.events.of(
        ev.WorkerRegistered, lambda e: e.agent_name.startswith(f"{fleet}/{host}.")
    )
    view = chain.roster.app.state.roster
    await view.changes.wait_for(
        lambda: any(w.agent_name == registered.agent_name for w in view.view(fleet).workers),
        timeout=within_s,
    )
    await chain.heard()
    return ProcessWorker(
        process=process, name=registered.agent_name, worker_id=registered.worker_id
    )
