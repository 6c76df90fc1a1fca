"""The health port of a process that runs jobs (``PINECALL_HEALTH_PORT``, 8081): the worker's
and the overflow's, the probes Kubernetes asks.

livekit-agents serves its own ``GET /`` on its ``port`` (``livekit/agents/worker.py``,
``health_check``): it answers ``OK`` from the moment the server starts, before it has registered
with LiveKit, and 503 only once the connection failed for good. That is no startup probe: a new
pod would count as up while LiveKit still has nobody to give a job to, and a rolling deploy would
stop an old worker too soon (seed 000, "Deploys drain": the new pod answers its startup probe
before an old one is told to stop). So that server is put on a port of its own (0) and this one
answers instead, from ``missing()``, the reasons the process takes no job now (the worker's:
``pinecall_worker.domain.not_ready``; the overflow's: not registered):

=============  ==========================================================================
route          answer
=============  ==========================================================================
GET /healthz   200 ``ok`` while the process runs, draining and unregistered included
               (liveness: a process waiting for LiveKit is not restarted for it)
GET /readyz    200 ``ready`` when ``missing()`` is empty, 503 with what is missing
               otherwise (the startup and readiness probe)
GET /          the same as ``/readyz``
GET /metrics   Prometheus text of the process's ``registry`` (the worker's and the overflow's
               ``pinecall_*`` of :mod:`pinecall_contracts.metrics`): livekit-agents'
               ``prometheus_port`` convention, on this port. Counted by the main process from
               what its jobs tell it, so no multiprocess mode is needed
=============  ==========================================================================
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from aiohttp import web
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    disable_created_metrics,
    generate_latest,
)

# no <name>_created series beside each counter: nothing reads them (the registry's list)
disable_created_metrics()  # type: ignore[no-untyped-call,unused-ignore]


class Health:
    """An aiohttp server on ``host``:``port`` (0: any free port, then :attr:`port` says which)
    answering from ``missing()``: the reasons the process is not ready (empty when it is)."""

    def __init__(
        self,
        host: str,
        port: int,
        missing: Callable[[], list[str]],
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.host, self.port = host, port
        self.missing = missing
        self.registry = registry or CollectorRegistry()
        self.listening = asyncio.Event()
        """Set once the port listens (:attr:`port` is then the one chosen)."""
        self._runner: web.AppRunner | None = None

    async def _live(self, _request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def _ready(self, _request: web.Request) -> web.Response:
        missing = self.missing()
        if missing:
            return web.Response(status=503, text="; ".join(missing))
        return web.Response(text="ready")

    async def _metrics(self, _request: web.Request) -> web.Response:
        body = generate_latest(self.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def start(self) -> None:
        """Listen; with port 0 the port chosen is in :attr:`port`."""
        app = web.Application()
        app.router.add_get("/healthz", self._live)
        app.router.add_get("/readyz", self._ready)
        app.router.add_get("/", self._ready)
        app.router.add_get("/metrics", self._metrics)
        self._runner = web.AppRunner(app, handle_signals=False, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, self.host, self.port).start()
        self.port = self._runner.addresses[0][1]
        self.listening.set()

    async def aclose(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
