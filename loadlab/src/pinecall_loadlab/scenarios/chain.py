"""The runtime choosing, whole, in one process: the stand-in → webhook-ingest → JetStream →
dispatcher → CreateDispatch → real workers heartbeating to a real roster, and call-log when a
scenario writes calls (:func:`chain_call_log`).

Each service is its own production app (``create_app``) run in this event loop and reached over
ASGI (``pinecall_servicekit.testing.apps.running``); the stand-in's webhooks reach webhook-ingest
through a loopback relay (the stand-in posts over HTTP, as LiveKit does, and the relay hands the
exact bytes and headers on), and so do workers in processes of their own reach the roster and
call-log (``Chain.urls``). Workers are unmodified ``pinecall_worker.server.Worker``s with a
light entrypoint (``answer_and_hold``: the job joins its lab room as the agent), on the THREAD
executor; their heartbeats go through a transport that :meth:`LabWorker.vanish` cuts, so a worker
can vanish as a machine does (frozen on LiveKit's socket, silent to the roster). The overflow is a
lab ``AgentServer`` registered as ``<fleet>/overflow`` that answers and holds, so a room sent to it
is observable.

A chain with call-log defines the agents its callers ring for (``ChainConfig.agents``: the lab's
agent by default) in every environment before its dispatcher starts, as an org would: the
dispatcher refuses a ring for an agent call-log does not hold (``unknown_agent``). A chain
without call-log defines none; its dispatcher's lookups go unanswered and fail open.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import re
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from aiohttp import web
from livekit import api
from livekit.agents import AgentServer
from livekit.protocol import models

from pinecall_call_log.app import create_app as call_log_app
from pinecall_call_log.settings import CallLogSettings
from pinecall_clients.calllog import CallLogClient
from pinecall_contracts.agents import AgentDefinition
from pinecall_contracts.fleet import WorkerHeartbeat
from pinecall_contracts.ids import ENVIRONMENTS, build_worker_name, overflow_name
from pinecall_dispatcher.app import create_app as dispatcher_app
from pinecall_dispatcher.service import DispatcherService
from pinecall_dispatcher.settings import DispatcherSettings
from pinecall_loadlab.livekit import StandIn
from pinecall_loadlab.livekit import events as ev
from pinecall_loadlab.livekit.callers import LAB_AGENT, LAB_ORG
from pinecall_loadlab.livekit.labagents import LabWorkers
from pinecall_loadlab.scenarios.labworkers import LabWorker, beat_forever, start_worker
from pinecall_roster.app import create_app as roster_app
from pinecall_roster.settings import RosterSettings
from pinecall_servicekit.changes import Changes
from pinecall_servicekit.testing.apps import Replica, running
from pinecall_webhook_ingest.app import create_app as ingest_app
from pinecall_webhook_ingest.settings import IngestSettings

AGENT_NAME = "lk.agent_name"


def heard_any(line: str) -> str:
    """A journal ``line`` with the seconds since the worker was heard left out (``heard N s
    ago``): they say the moment (0 s on a quiet machine, 1 s on a loaded one), not a rule."""
    return re.sub(r"heard \d+ s ago", "heard N s ago", line)


@dataclass(kw_only=True)
class ChainConfig:
    """Where the chain's services store and talk, their keys, and the dispatcher's numbers."""

    database_url: str
    nats_url: str
    namespace: str
    operator_key: str
    """An operator's key: what a scenario reads as an operator would (a call's entries)."""
    service_key: str
    """The services' key: the dispatcher's reads of the roster and its writes to call-log."""
    fleet_keys: dict[str, str]
    """Fleet key per environment, for the workers' heartbeats."""
    api_key: str
    api_secret: str
    """The stand-in's LiveKit key, used for every environment."""
    heartbeat_s: float = 5.0
    log_level: str = "INFO"
    dispatcher: dict[str, Any] = field(default_factory=dict)
    """DispatcherSettings fields to change (the rules' numbers, shortened in tests)."""
    agents: list[tuple[str, str]] = field(default_factory=lambda: [(LAB_ORG, LAB_AGENT)])
    """``(org, agent)`` defined in every environment when the chain has call-log."""


def lab_definition(agent: str = LAB_AGENT) -> AgentDefinition:
    """The definition the lab puts for ``agent``: a prompt, and the workers' own voice and
    model."""
    return AgentDefinition(name=agent, prompt="You answer the load lab's callers. Be brief.")


async def define_agents(call_log: Replica, config: ChainConfig) -> None:
    """Put ``config.agents`` in every environment on ``call_log``, with the operator's key."""
    transport = httpx.ASGITransport(app=call_log.app)  # type: ignore[arg-type]
    async with CallLogClient(
        "http://call-log.lab", config.operator_key, transport=transport
    ) as log:
        for org, agent in config.agents:
            for environment in ENVIRONMENTS:
                await log.put_agent(lab_definition(agent), org=org, environment=environment)


class Chain:
    """The services of the runtime choosing, and its workers."""

    def __init__(
        self,
        lk: StandIn,
        config: ChainConfig,
        roster: Replica,
        replica: Callable[[], contextlib.AbstractAsyncContextManager[Replica]],
        ingest: Replica,
        *,
        call_log: Replica | None,
        urls: dict[str, str],
    ) -> None:
        self.lk, self.config, self.roster = lk, config, roster
        self.ingest = ingest
        """webhook-ingest (the stand-in's webhooks reach it through a relay)."""
        self.call_log = call_log
        """call-log, when the chain was given one (the dispatcher's, and the workers' that write
        calls)."""
        self.urls = urls
        """``roster`` (and ``call-log``) over loopback HTTP, for workers in processes of their
        own."""
        self.replica = replica
        """Start another dispatcher replica (an async context manager)."""
        self.dispatchers: list[Replica] = []
        self.workers: list[LabWorker] = []
        self.lab = LabWorkers(lk, config.api_key, config.api_secret)
        """Lab AgentServers of the chain (the overflow; LiveKit-choosing workers)."""
        self._beats: list[asyncio.Task[None]] = []
        self._tmp = tempfile.TemporaryDirectory(prefix="pinecall-chain-")
        self.tmp = self._tmp.name
        """A folder of the chain's own (workers' sockets and output), removed at its close."""
        self.livekit = api.LiveKitAPI(lk.url, config.api_key, config.api_secret)

    @property
    def service(self) -> DispatcherService:
        """The first dispatcher replica's service."""
        service: DispatcherService = self.dispatchers[0].app.state.dispatcher
        return service

    async def worker(
        self, host: str, *, seats: int, fleet: str = "pinecall", environment: str = "production"
    ) -> LabWorker:
        """Start a real worker of ``fleet`` with ``seats``; returns once LiveKit registered it
        and the roster heard it say so."""
        handle = start_worker(
            self.lk,
            self.roster,
            self.config,
            host=host,
            seats=seats,
            fleet=fleet,
            fleet_key=self.config.fleet_keys[environment],
            measures=os.path.join(self.tmp, f"{host}.sock"),
        )
        worker = handle.worker
        self.workers.append(handle)
        async with asyncio.timeout(60):
            registered = asyncio.ensure_future(worker.registered.wait())
            try:  # a worker that cannot start says why now, not at the timeout
                await asyncio.wait({registered, handle.task}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                registered.cancel()
            if handle.task.done():
                raise RuntimeError(
                    f"worker {host} exited before registering: {handle.task.result()}"
                )
            await worker.heartbeat.beat()  # said registered now, not at its next beat
            await self.heard()
        return handle

    async def heard(self) -> None:
        """Every dispatcher replica reads the roster now (not when its rows are next stale)."""
        for replica in self.dispatchers:
            await replica.app.state.dispatcher.roster.refresh()

    async def pretend(
        self,
        host: str,
        *,
        seats: int,
        load: Callable[[AgentServer], float],
        fleet: str = "pinecall",
        environment: str = "production",
    ) -> str:
        """A lab ``AgentServer`` under the worker name ``<fleet>/<host>.<start>``, reporting
        ``load`` to LiveKit (1.0 declines every offer), with heartbeats of a worker with
        ``seats`` and no call; returns the name."""
        name = build_worker_name(fleet, host, int(time.time()))
        await self.lab.start(agent_name=name, seats=seats, load=load)
        beat = beat_forever(
            self.roster,
            WorkerHeartbeat(
                fleet=fleet, worker=name, agent_name=name, active=0, max_jobs=seats, load=0.0
            ),
            self.config.fleet_keys[environment],
            self.config.heartbeat_s,
        )
        self._beats.append(asyncio.create_task(beat, name=f"heartbeat-{host}"))
        await self.heard()
        return name

    async def overflow(self, fleet: str = "pinecall") -> str:
        """Register ``<fleet>/overflow``: a lab server that answers every room it is sent."""
        async with asyncio.timeout(60):
            return await self.lab.start(agent_name=overflow_name(fleet), seats=1000)

    async def handled(
        self, room: str, event: str, kind: str | None = None, *, count: int = 1
    ) -> None:
        """Wait until a dispatcher replica applied ``count`` of ``event`` of ``room`` (of a
        ``kind`` participant: the second agent's join is the sentence job's, the first the dead
        one's); bound it with ``asyncio.timeout``."""

        services: list[DispatcherService] = [r.app.state.dispatcher for r in self.dispatchers]

        def seen(_: DispatcherService) -> bool:  # counted over every replica: any may apply one
            return (
                sum(
                    e.room == room and e.event == event and kind in (None, e.participant_kind)
                    for service in services
                    for e in service.placing.handled
                )
                >= count
            )

        await self._any_replica(lambda s: s.placing.changes, seen)

    async def outcome(self, call: str, outcome: str, *, count: int = 1) -> None:
        """Wait until ``count`` offers of ``call`` on a dispatcher replica came to ``outcome``
        (``dispatched``, ``room_gone``, …); bound it with ``asyncio.timeout``."""
        await self._any_replica(
            lambda s: s.offering.changes,
            lambda s: sum(x == (call, outcome) for x in s.offering.outcomes) >= count,
        )

    async def _any_replica(
        self,
        changes: Callable[[DispatcherService], Changes],
        holds: Callable[[DispatcherService], bool],
    ) -> None:
        services: list[DispatcherService] = [r.app.state.dispatcher for r in self.dispatchers]
        await ev.first_of(
            *(changes(s).wait_for(functools.partial(holds, s), timeout=3600) for s in services)
        )

    async def answered_by(self, room: str) -> str | None:
        """The agent name of the agent in ``room`` (a worker's, or ``<fleet>/overflow``)."""
        people = await self.livekit.room.list_participants(api.ListParticipantsRequest(room=room))
        for p in people.participants:
            if p.kind == models.ParticipantInfo.Kind.AGENT:
                return p.attributes.get(AGENT_NAME, "")
        return None

    async def hang_up(self, *, within_s: float = 10.0) -> None:
        """End every call on the stand-in as a call ends (its room deleted: each job gets
        LiveKit's ``JobTermination``) and wait, up to ``within_s``, until no real worker holds
        a job. Closing calls the chain's close does first: a worker stopped with its calls up
        runs into its 1 s drain timeout and logs ``drain timeout`` and ``seal timeout`` ERRORs,
        untrue of a lab that simply ends (``lab run capacity``, issue 14 item 13)."""
        for room in list(self.lk.rooms.rooms):
            self.lk.rooms.delete_room(room)
        with contextlib.suppress(TimeoutError):  # what is left is the drain's, and it says so
            async with asyncio.timeout(within_s):
                for handle in (h for h in self.workers if not h.transport.cut):
                    jobs = handle.worker.jobs  # (a vanished worker's never hear their rooms go)
                    while True:
                        jobs.changed.clear()
                        if not jobs.calls():  # livekit-agents' active_jobs lags its event
                            break
                        await jobs.changed.wait()

    async def aclose(self) -> None:
        for beat in self._beats:
            beat.cancel()
        await asyncio.gather(*self._beats, return_exceptions=True)
        await self.hang_up()
        for handle in self.workers:
            handle.worker.stop()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(30):
                await asyncio.gather(*(h.task for h in self.workers), return_exceptions=True)
        await self.lab.aclose()
        await self.livekit.aclose()
        self._tmp.cleanup()


async def _relay(replica: Replica) -> tuple[web.AppRunner, str]:
    """A loopback server handing each request, bytes and headers unchanged, to ``replica``;
    its base URL."""

    async def forward(request: web.Request) -> web.Response:
        headers = {k: v for k, v in request.headers.items() if k.lower() != "host"}
        r = await replica.request(
            request.method,
            request.path_qs,
            content=await request.read(),
            headers=headers,
            timeout=30,
        )
        kept = {k: v for k, v in r.headers.items() if k.lower() == "content-type"}
        return web.Response(status=r.status_code, body=r.content, headers=kept)

    app = web.Application()
    app.router.add_route("*", "/{path:.*}", forward)
    runner = web.AppRunner(app, handle_signals=False, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, f"http://127.0.0.1:{runner.addresses[0][1]}"


def _base(config: ChainConfig) -> dict[str, Any]:
    """The settings every service of the chain shares: its database, NATS and logs."""
    return {
        "database_url": config.database_url,
        "nats_url": config.nats_url,
        "nats_namespace": config.namespace,
        "log_format": "text",
        "log_level": config.log_level,
    }


def chain_call_log(config: ChainConfig) -> contextlib.AbstractAsyncContextManager[Replica]:
    """A call-log replica on the chain's database and namespace, in this loop: give it to
    :func:`runtime_chain` where calls are written or lost agents handled."""
    return running(call_log_app(CallLogSettings.from_env({}, **_base(config))))


@contextlib.asynccontextmanager
async def runtime_chain(
    lk: StandIn,
    config: ChainConfig,
    *,
    call_log: Replica | None = None,
    dispatchers: int = 1,
) -> AsyncIterator[Chain]:
    """The chain on ``lk``: roster, webhook-ingest (LiveKit's webhooks to it), ``dispatchers``
    dispatcher replicas (``Chain.replica()`` starts more), and ``call_log`` when given, with
    ``config.agents`` defined on it (else the dispatcher's call-log does not answer: the death
    handler then offers the sentence without reading the call, after its retries, and every
    ring's agent lookup fails open)."""
    base = _base(config)
    if call_log is not None:
        await define_agents(call_log, config)
    keys = f"production={config.api_key}:{config.api_secret},sandbox={config.api_key}:{config.api_secret}"
    settings = DispatcherSettings.from_env(
        {}, **base, livekit_keys=keys, service_key=config.service_key, **config.dispatcher
    )
    async with (
        running(roster_app(RosterSettings.from_env({}, **base, livekit_url=lk.url))) as roster,
        running(ingest_app(IngestSettings.from_env({}, **base, livekit_keys=keys))) as ingest,
        contextlib.AsyncExitStack() as stack,
    ):
        urls = {}
        relayed = {"ingest": ingest, "roster": roster} | (
            {"call-log": call_log} if call_log else {}
        )
        for name, replica in relayed.items():
            runner, urls[name] = await _relay(replica)
            stack.push_async_callback(runner.cleanup)
        webhook = f"{urls['ingest']}/v1/livekit/webhook?world=production"  # the chain's LiveKit
        lk.webhooks.urls.append(webhook)
        stack.callback(lk.webhooks.urls.remove, webhook)
        transport = httpx.ASGITransport(app=call_log.app) if call_log else None  # type: ignore[arg-type]
        chain = Chain(
            lk,
            config,
            roster,
            lambda: running(dispatcher_app(settings, call_log=transport)),
            ingest,
            call_log=call_log,
            urls=urls,
        )
        stack.push_async_callback(chain.aclose)
        for _ in range(dispatchers):
            chain.dispatchers.append(await stack.enter_async_context(chain.replica()))
        yield chain
