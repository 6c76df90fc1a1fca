"""One worker process: the AgentServer, its name and load, heartbeat, measures, drain and cordon.

It registers with LiveKit as ``<fleet>/<host>.<start>`` so a dispatch to that name reaches it and no
other (seed 000, "The gateway hears every worker"). A counting worker (``PINECALL_MAX_JOBS``)
reports ``0.7 × calls ÷ seats`` (0.7: LiveKit's load threshold) to LiveKit and ``calls ÷ seats`` to
the roster. SIGTERM drains: no new call (it tells LiveKit and declines offers), its calls finish
within the drain timeout; past it the worker closes its jobs (each ends its call ``drained``), seals
every call it still held within ``seal_timeout_s`` (60 s), and exits 0. A cordon said in a heartbeat
answer drains it with no timeout and exits 3 (seed 000, "Deploys drain, cordons shrink"). The main
process knows each running job's call (``jobs``) and ends it ``failed`` when the job's process dies.
Its health port answers the startup probe once LiveKit registered it and the plugins are loaded
(``health``), and serves its metrics (:mod:`pinecall_worker.metrics`). Whether LiveKit holds it is what it says now (``link``): a connection gone or hung
makes its heartbeat say no ``agent_name`` at once, and its probe 503, until it registers again.
"""

from __future__ import annotations

import asyncio
import logging
import os
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
from livekit.agents import AgentServer, JobContext, JobExecutorType, JobProcess, Plugin

from pinecall_clients.calllog import CallLogClient
from pinecall_clients.roster import RosterClient
from pinecall_contracts.fleet import HeartbeatReply, WorkerHeartbeat
from pinecall_jobs.health import Health
from pinecall_jobs.native import make_thread_safe
from pinecall_jobs.running import serve_until_stopped
from pinecall_jobs.server import close_server
from pinecall_servicekit.lifecycle import ExitCode
from pinecall_worker import domain
from pinecall_worker.counting import CountingServer
from pinecall_worker.heartbeat import Heartbeat
from pinecall_worker.jobs import HeldCalls
from pinecall_worker.link import Link, LinkedServer
from pinecall_worker.measures import MeasuresSocket
from pinecall_worker.metrics import Now, WorkerMetrics
from pinecall_worker.relay import RelaySocket
from pinecall_worker.settings import JobSetup, WorkerSettings

_log = logging.getLogger(__name__)
Entrypoint = Callable[[JobContext], Awaitable[None]]


def modules_of(*functions: Callable[..., Any] | None) -> list[str]:
    """The importable modules that define ``functions``, for the forkserver to preload."""
    names = (getattr(f, "__module__", None) for f in functions if f is not None)
    return list(dict.fromkeys(n for n in names if n and n != "__main__"))


def _seconds(s: float | None) -> float | None:
    """Seconds as a heartbeat carries them (to the ms, at most a day)."""
    return None if s is None else round(min(s, 86_400.0), 3)


class Worker:
    """A worker of ``settings.fleet``; :meth:`run` returns its exit code.

    It beats to the roster at ``settings.roster_url``, or through ``roster_transport`` (a test's
    in-process replica, or a transport a test cuts) when given.
    """

    def __init__(
        self,
        settings: WorkerSettings,
        entrypoint: Entrypoint,
        *,
        prewarm: Callable[[JobProcess], None] | None = None,
        roster_transport: httpx.AsyncBaseTransport | None = None,
        executor: JobExecutorType = JobExecutorType.PROCESS,
        num_idle_processes: int | None = None,
        start: int | None = None,
        plugins: frozenset[str] = domain.PLUGINS,
        preload: tuple[str, ...] = (),
    ) -> None:
        self.settings = settings
        self.counting = settings.max_jobs is not None
        self.seats = settings.max_jobs or domain.default_seats(settings.cpus())
        self.load_threshold = domain.load_threshold()
        self.name = settings.worker_name(start or int(time.time()))
        self.link = Link(self._link_changed)
        self.registered = self.link.registered
        """Set while LiveKit holds the worker (cleared when its connection is gone or hung)."""
        self.draining = False
        self.cordoned = False
        self._stop = asyncio.Event()
        self._roster = RosterClient(
            settings.fleet_key, base_url=settings.roster_url, transport=roster_transport
        )
        self.measures = MeasuresSocket(
            Path(settings.measures_socket)
            if settings.measures_socket
            else Path(tempfile.gettempdir()) / f"pinecall-measures-{os.getpid()}.sock"
        )
        self.plugins = plugins
        self.call_log = (
            CallLogClient(settings.call_log_url, settings.fleet_key) if settings.fleet_key else None
        )
        self.relay = (
            RelaySocket(
                Path(settings.relay_socket)
                if settings.relay_socket
                else Path(tempfile.gettempdir())
                / f"pinecall-relay-{os.getpid()}-{id(self):x}.sock",
                self.call_log,
            )
            if self.call_log is not None
            else None
        )
        self.jobs = HeldCalls(
            self.call_log,
            self.measures,
            fleet=settings.fleet,
            environment=settings.environment(),
        )
        self.metrics = WorkerMetrics(settings.fleet, self._now)
        self.measures.metrics = self.metrics
        self.health = Health(
            settings.host, settings.health_port, self.not_ready, self.metrics.registry
        )
        counting: dict[str, Any] = (
            {
                "seats": self.seats,
                "load_threshold": self.load_threshold,
                "active": lambda: self.active,
            }
            if self.counting
            else {}
        )
        if executor is JobExecutorType.THREAD:
            make_thread_safe()
        self.server = (CountingServer if self.counting else LinkedServer)(
            self.link,
            **counting,
            ws_url=settings.livekit_url,
            api_key=settings.livekit_api_key,
            api_secret=settings.livekit_api_secret,
            job_executor_type=executor,
            load_fnc=self._livekit_load if self.counting else None,
            num_idle_processes=(
                domain.idle_processes(self.seats, settings.cpus())
                if num_idle_processes is None
                else num_idle_processes
            ),
            drain_timeout=int(settings.drain_timeout_s),
            # a job told to stop gets half the seal window to write its end; the rest is ours
            shutdown_process_timeout=settings.seal_timeout_s / 2,
            port=0,  # livekit-agents' own health server says OK before registering: not ours
            # the call's own modules too, not only the plugins livekit-agents knows of: else each
            # job process imports them (1.4 s measured here: the SDKs, clients, contracts)
            preload_modules=[*modules_of(entrypoint, prewarm), *preload],
            # each job process gets the worker's settings, its measures socket included
            setup_fnc=JobSetup(
                settings.to_env()
                | {"PINECALL_MEASURES_SOCKET": str(self.measures.path)}
                | ({"PINECALL_RELAY_SOCKET": str(self.relay.path)} if self.relay else {}),
                prewarm,
            ),
        )
        self.server.rtc_session(entrypoint, agent_name=self.name)
        self.server.on("worker_started", self._on_started)
        self.server.on("worker_registered", self._on_registered)
        self.heartbeat = Heartbeat(
            self._roster,
            self.state,
            self._on_reply,
            every_s=settings.heartbeat_s,
        )
        self._seats_changed = asyncio.Event()
        self.measures.on_ended = self._seats_changed.set
        self.jobs.on_change = self._seats_changed.set

    @property
    def active(self) -> int:
        """Calls held: the jobs running less those whose call has ended on the log.

        A job still closing after its call's end (its writer sealing, its process exiting) holds
        no seat: the dispatcher frees the seat on ``call.ended`` and may offer the next call at
        once, so the worker must not decline it at LiveKit's load threshold meanwhile (seed 000,
        "Capacity is counted in calls"). The job says its call's end over the measures socket as
        soon as the end is on the log (:meth:`pinecall_worker.call.record.Recorder.finish`).
        """
        ended = sum(self.measures.heard_ended(h.offer.call) for h in self.jobs.calls())
        return max(0, len(self.server.active_jobs) - ended)

    async def _say_seats(self) -> None:
        """Each time a call starts or ends (its job launched or closed, its end on the log), say
        the seats at once: to LiveKit first, then in a heartbeat to the roster, so the dispatcher,
        which frees a seat when the roster's count falls, never offers a seat LiveKit still
        holds full. Changes that come while one is said are said together (issue 14, item 5:
        a hang-up's seat was seen 4–5 s late, at the next heartbeat)."""
        while True:
            await self._seats_changed.wait()
            self._seats_changed.clear()
            if isinstance(self.server, CountingServer) and self.registered.is_set():
                await self.server.say_status()
            await self.heartbeat.beat()

    def _now(self) -> Now:
        return Now(
            seats=self.seats,
            calls=self.active,
            registered=self.registered.is_set(),
            draining=self.draining,
            relay_requests=self.relay.relay.requests if self.relay else 0,
            relay_batches=self.relay.relay.batches if self.relay else 0,
        )

    def _livekit_load(self, _server: AgentServer) -> float:
        return domain.livekit_load(self.active, self.seats, self.load_threshold)

    def _on_started(self) -> None:
        self.jobs.attach(self.server._proc_pool)  # made by run(); no public handle in 1.8.9

    def not_ready(self) -> list[str]:
        """Why the startup probe is refused now; empty once registered with plugins loaded."""
        return domain.not_ready(
            registered=self.registered.is_set(),
            loaded={p.package for p in Plugin.registered_plugins},
            needed=self.plugins,
            draining=self.draining,
        )

    def _on_registered(self, worker_id: str, _info: Any) -> None:
        _log.info("registered with LiveKit as %s (%s)", self.name, worker_id)

    def _link_changed(self) -> None:
        self.heartbeat.wake()  # the roster hears it now, not at the next beat

    def state(self) -> WorkerHeartbeat:
        """This heartbeat's body: the calls now, the seats, the minute."""
        active = self.active
        return WorkerHeartbeat(
            fleet=self.settings.fleet,
            worker=self.name,
            unregistered_s=_seconds(self.link.unregistered_s()),
            agent_name=self.name if self.registered.is_set() else None,
            active=active,
            max_jobs=self.seats,
            load=round(min(1000.0, domain.roster_load(active, self.seats)), 4),
            draining=self.draining,
            minute=self.measures.minute.read(time.monotonic()),
            load_per_core=round(os.getloadavg()[0] / self.settings.cpus(), 3),
        )

    async def _on_reply(self, reply: HeartbeatReply) -> None:
        if reply.cordoned and not self.cordoned:
            _log.warning("cordoned: taking no new call, finishing %d, then exit 3", self.active)
            self.cordoned = True
            self._stop.set()

    def stop(self) -> None:
        """Drain and exit (what SIGTERM does)."""
        self._stop.set()

    async def run(self) -> ExitCode:
        """Serve calls until told to stop; drain; return the exit code."""
        if not self.counting:
            _log.warning(
                "PINECALL_MAX_JOBS is not set: LiveKit will gate this worker on CPU, "
                "which loses calls when a call's process starts (seed 000); set it"
            )
        await self.measures.start()
        try:
            if self.relay is not None:
                await self.relay.start()
            await self.health.start()
        except BaseException:
            await self.measures.close()  # the port is taken: nothing of ours is left open
            if self.relay is not None:
                await self.relay.close()
            raise
        try:
            code = await serve_until_stopped(
                self.server,
                self._stop,
                self._drain,
                alongside={"heartbeat": self.heartbeat.run(), "seats": self._say_seats()},
            )
            return ExitCode.FAILED if code is None else code
        finally:
            self.draining = True
            await self.heartbeat.beat()  # the last word: draining, the calls left
            await self.jobs.aclose(within_s=self.settings.seal_timeout_s)
            if self.relay is not None:  # the jobs are gone: nothing sends through it now
                await self.relay.close()
            await self._roster.aclose()
            if self.call_log is not None:
                await self.call_log.aclose()
            await self.health.aclose()
            await self.measures.close()

    async def _drain(self) -> ExitCode:
        self.draining = True
        await self.heartbeat.beat()  # the roster counts it out now, not in 5 s
        if self.cordoned:
            await self.server.drain(timeout=None)
            return ExitCode.CORDONED
        try:
            await self.server.drain(timeout=int(self.settings.drain_timeout_s))
        except TimeoutError:
            await self._seal_what_is_left()
        return ExitCode.OK

    async def _seal_what_is_left(self) -> None:
        """Past the drain timeout: close the jobs (each ends its call drained), then seal every
        call still held, all within ``seal_timeout_s``."""
        held = self.jobs.calls()
        _log.error(
            "drain timeout: %d calls still held; ending them drained within %.0f s",
            len(held),
            self.settings.seal_timeout_s,
        )
        self.jobs.fallback, self.jobs.fallback_cause = "drained", "drain_timeout"
        deadline = asyncio.get_running_loop().time() + self.settings.seal_timeout_s
        # not cancelled: livekit-agents bounds each job's close (shutdown_process_timeout), then
        # kills it, and a job process left running would outlive the worker
        await close_server(self.server)
        try:
            async with asyncio.timeout_at(deadline):
                await self.jobs.aclose()
                await self.jobs.seal(held, "drained", "drain_timeout")
        except TimeoutError:
            _log.error("seal timeout: the calls left unsealed are the reaper's")
