"""The overflow's process: an ``AgentServer`` registered as exactly ``<fleet>/overflow``.

**It must never refuse a job**, so it counts no seats against LiveKit's load threshold and reports
a load of **0.0**, always (``load_fnc``). LiveKit's 0.7 load threshold is read twice and is never
overridden (``GLOSSARY.md``, "load threshold"), and 0.0 passes both:

* livekit-server offers a job only while ``Σ max(0, target_load − load) > 0`` over available
  workers and draws one with weight ``1 − load`` (reference §2.3–2.4): with load 0 the overflow
  always stands at 0.7 and weight 1;
* livekit-agents declines when ``load + reserved × per_job ≥ load_threshold`` and says ``WS_FULL``
  (``livekit/agents/worker.py``, ``_get_effective_load``): with jobs running ``per_job`` is
  ``load ÷ jobs`` = 0, so nothing adds up however many sentences run. With **no** job running,
  each offer answered but not yet assigned counts ``0.7 ÷ num_idle_processes``: at most
  :data:`IDLE` offers at once are in flight before a burst into an idle overflow is declined, so
  :data:`IDLE` is the burst it takes from nothing; once one sentence runs there is no limit.

Only the dispatcher offers it calls (seed 000, "Full, at the endpoint"): no SIP rule or token
names ``<fleet>/overflow``. Jobs run in threads of this process (``JobExecutorType.THREAD``): a
sentence loads no model and waits on the network, and a process each (~100 MB, seconds to start)
would make the overflow the first thing to run out. It does not beat to the roster: the overflow
is not a worker's seats, and counting it would make a full fleet look open. SIGTERM drains: no
new job (livekit-agents says ``WS_FULL`` and declines), the sentences in flight finish within
``drain_timeout_s``, exit 0.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import logging
from collections.abc import Iterator
from typing import Any

from livekit.agents import AgentServer, JobContext, JobExecutorType
from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from pinecall_clients.bucket import start_opening
from pinecall_contracts.ids import overflow_name
from pinecall_jobs.health import Health
from pinecall_jobs.native import make_thread_safe
from pinecall_jobs.running import serve_until_stopped
from pinecall_overflow.job import entrypoint
from pinecall_overflow.settings import OverflowSettings
from pinecall_servicekit.lifecycle import ExitCode

_log = logging.getLogger(__name__)

IDLE = 16
"""Job threads kept warm (an idle thread is a thread and its event loop): the offers an idle
overflow answers at once (see the module docstring). An offer is in flight for a round trip to
LiveKit, so 16 at once is a burst of hundreds of callers a second."""


def no_load() -> float:
    """The load the overflow reports to LiveKit: 0.0, always (see the module docstring)."""
    return 0.0


ANSWERED = Counter(
    "pinecall_overflow_calls",
    "calls the overflow answered",
    ["fleet"],
    registry=None,
)
"""Calls answered by this process's overflow, by fleet: counted where each job starts, in a
thread of this process (``JobExecutorType.THREAD``), so the main process holds the count."""


async def answered(settings: OverflowSettings, ctx: JobContext) -> None:
    """The overflow's job: counted in :data:`ANSWERED`, then its sentence (:func:`entrypoint`)."""
    ANSWERED.labels(settings.fleet).inc()
    await entrypoint(settings, ctx)


class OverflowMetrics(Collector):
    """The overflow's ``/metrics`` (on its health port): ``pinecall_overflow_calls_total{fleet}``,
    ``pinecall_overflow_calls{fleet}`` (held now), ``pinecall_overflow_registered{fleet}``."""

    def __init__(self, overflow: Overflow) -> None:
        self.overflow = overflow
        ANSWERED.labels(overflow.settings.fleet)  # said from the start: a rate needs a zero
        self.registry = CollectorRegistry()
        self.registry.register(self)

    def collect(self) -> Iterator[Metric]:
        fleet = self.overflow.settings.fleet
        for name, help, value in (
            ("pinecall_overflow_calls", "calls the overflow holds now", self.overflow.active),
            (
                "pinecall_overflow_registered",
                "1 while LiveKit holds the overflow",
                self.overflow.registered.is_set(),
            ),
        ):
            family = GaugeMetricFamily(name, help, labels=["fleet"])
            family.add_metric([fleet], float(value))
            yield family
        for counted in ANSWERED.collect():
            # this overflow's fleet only: a test's process may run the overflows of two
            counted.samples = [s for s in counted.samples if s.labels.get("fleet") == fleet]
            yield counted


class Overflow:
    """The overflow of ``settings.fleet``; :meth:`run` returns its exit code."""

    def __init__(
        self,
        settings: OverflowSettings,
        *,
        executor: JobExecutorType = JobExecutorType.THREAD,
        num_idle_processes: int = IDLE,
    ) -> None:
        self.settings = settings.check()
        self.name = overflow_name(settings.fleet)
        self.registered = asyncio.Event()
        self._stop = asyncio.Event()
        if executor is JobExecutorType.THREAD:
            make_thread_safe()
            start_opening()  # the recording's bucket clients' thread, before a job's loop
        if settings.lab_rooms:
            # the lab room's modules, which a production overflow never imports, here rather
            # than in a sentence job's thread, whose import holds every job's loop (up's log)
            importlib.import_module("pinecall_labroom.agents")
            importlib.import_module("pinecall_labroom.jobs")
        self.server = AgentServer(
            ws_url=settings.livekit_url,
            api_key=settings.livekit_api_key,
            api_secret=settings.livekit_api_secret,
            job_executor_type=executor,
            load_fnc=no_load,
            num_idle_processes=num_idle_processes,
            drain_timeout=int(settings.drain_timeout_s),
            port=0,
        )
        self.server.rtc_session(functools.partial(answered, settings), agent_name=self.name)
        self.server.on("worker_registered", self._on_registered)
        self.metrics = OverflowMetrics(self)
        self.health = Health(
            settings.host, settings.health_port, self._missing, self.metrics.registry
        )

    @property
    def active(self) -> int:
        return len(self.server.active_jobs)

    def _on_registered(self, worker_id: str, _info: Any) -> None:
        _log.info("registered with LiveKit as %s (%s)", self.name, worker_id)
        self.registered.set()

    def stop(self) -> None:
        """Drain and exit (what SIGTERM does)."""
        self._stop.set()

    async def _drain(self) -> ExitCode:
        try:
            await self.server.drain(timeout=int(self.settings.drain_timeout_s))
        except TimeoutError:
            _log.error("drain timeout: %d sentences still running end now", self.active)
        return ExitCode.OK

    def _missing(self) -> list[str]:
        return [] if self.registered.is_set() else ["not registered with LiveKit yet"]

    async def run(self) -> ExitCode:
        """Take the dispatcher's jobs until told to stop; drain; return the exit code."""
        await self.health.start()
        try:
            code = await serve_until_stopped(self.server, self._stop, self._drain)
            return ExitCode.FAILED if code is None else code
        finally:
            await self.health.aclose()
