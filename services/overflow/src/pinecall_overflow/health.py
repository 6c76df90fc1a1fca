"""The overflow's health port: ``GET /``, ``/healthz`` and ``/readyz`` answer 200 ``OK`` once
LiveKit registered it (``worker_registered``), 503 before: a pod counts as started only when
LiveKit can give it a job. livekit-agents' own port answers OK before that
(``livekit/agents/worker.py``, ``health_check``), so it listens on a port nobody probes (0)."""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web


class Health:
    """The health port on ``host``:``port`` (0: any free port, then :attr:`port` says which)."""

    def __init__(self, host: str, port: int, registered: Callable[[], bool]) -> None:
        self.host, self.port = host, port
        self._registered = registered
        app = web.Application()
        app.router.add_get("/", self._answer)
        app.router.add_get("/healthz", self._answer)
        app.router.add_get("/readyz", self._answer)  # as the worker's: the probe by its name
        self._runner = web.AppRunner(app, handle_signals=False, access_log=None)

    async def _answer(self, _request: web.Request) -> web.Response:
        if self._registered():
            return web.Response(text="OK")
        return web.Response(status=503, text="not registered with LiveKit yet")

    async def start(self) -> None:
        await self._runner.setup()
        await web.TCPSite(self._runner, self.host, self.port).start()
        self.port = self._runner.addresses[0][1]

    async def aclose(self) -> None:
        await self._runner.cleanup()
