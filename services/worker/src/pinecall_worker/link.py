"""Whether LiveKit holds this worker now: its agent socket registered and answering.

livekit-agents 1.8.9 says when LiveKit registered the worker (the ``worker_registered`` event) and
never when that ends. A dropped socket goes back into its reconnect loop without a word; a socket
whose server side hangs is noticed only by aiohttp's heartbeat, after 30 s without a byte and 15 s
more without a pong (``HEARTBEAT_INTERVAL = 30``, ``ws_connect(..., heartbeat=30)``), and 1.8.9
sends no ``WorkerPing`` of its own. A worker that said "registered" from its first registration
on was offered calls LiveKit could not give it, each caller waiting the dispatcher's 12 s
re-offer (issue 14, item 7).

:class:`LinkedServer` is the AgentServer with its ``_run_ws`` wrapped by :meth:`Link.serve`: the
worker is registered while that connection serves and not otherwise, and a connection that says
nothing for ``silent_s`` (3 s) although a ``WorkerPing`` went out every second is given up (the
worker says so at once, then the framework reconnects).

What this relies on in livekit-agents 1.8.9 (``livekit/agents/worker.py``), pinned by
``tests/test_link.py``:

- ``AgentServer._connection_task`` (L1088-1181) reads the register answer, calls
  ``_handle_register`` (which emits ``worker_registered``) and then ``await self._run_ws(ws)``
  (L1160) for as long as that connection serves: ``_run_ws`` returns or raises only when it is
  over (its receive task raises on CLOSE/CLOSED/CLOSING, L1203-1219), and anything it raises
  sends the loop to reconnect (L1161-1181; at once the first time, then 2, 4, … 10 s);
- ``_run_ws``'s receive task reads the socket through ``ws.receive()`` only (L1201), and ignores a
  ``pong`` (no branch for it, L1239-1249). LiveKit answers a ``WorkerPing`` with a ``WorkerPong``
  (``LK:pkg/agent/worker.go:L135-145``; the stand-in does too).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from livekit.agents import AgentServer
from livekit.protocol import agent

_log = logging.getLogger(__name__)

SILENT_S = 3.0
"""A connection that says nothing this long, pinged every :data:`PING_S`, is given up."""
PING_S = 1.0
"""A ``WorkerPing`` goes out after this long without a word from LiveKit."""
CLOSE_S = 1.0
"""The close of a connection given up waits this long for LiveKit's close frame (aiohttp's own
wait is 10 s, which a hung server spends whole before the framework may reconnect)."""


class Link:
    """Whether LiveKit holds the worker now (:attr:`registered`, set and cleared), and since when;
    ``on_change()`` is called each time that changes."""

    def __init__(
        self,
        on_change: Callable[[], None] = lambda: None,
        *,
        silent_s: float = SILENT_S,
        ping_s: float = PING_S,
    ) -> None:
        if not 0 < ping_s < silent_s:
            raise ValueError(f"ping_s ({ping_s}) must be more than 0 and less than silent_s")
        self.on_change = on_change
        self.silent_s, self.ping_s = silent_s, ping_s
        self.registered = asyncio.Event()
        """Set while LiveKit holds the worker, cleared once the connection is gone."""
        self.lost = 0
        """How many times a registration ended (for logs and tests)."""
        self._since = time.monotonic()

    def unregistered_s(self) -> float | None:
        """Seconds since LiveKit last held the worker (since its start if it never has); None
        while it holds it."""
        if self.registered.is_set():
            return None
        return time.monotonic() - self._since

    def _set(self, registered: bool, why: str | None = None) -> None:
        """Registered or not from now; ``why`` it ended is logged as a warning (None: the worker
        is closing, nothing to warn of)."""
        if registered == self.registered.is_set():
            return
        self._since = time.monotonic()
        if registered:
            self.registered.set()
        else:
            self.registered.clear()
            self.lost += 1
            if why is not None:
                _log.warning(
                    "LiveKit no longer holds this worker (%s): it is offered no call until it "
                    "registers again",
                    why,
                )
        self.on_change()

    async def serve(
        self,
        ws: aiohttp.ClientWebSocketResponse,
        run_ws: Callable[[aiohttp.ClientWebSocketResponse], Awaitable[None]],
    ) -> None:
        """Run the framework's ``run_ws(ws)``, registered meanwhile; ping LiveKit when it is quiet
        and give the connection up (``ConnectionError``, which the framework's loop reconnects
        from) once it has said nothing for ``silent_s``. Returns or raises as ``run_ws`` does."""
        loop = asyncio.get_running_loop()
        heard = loop.time()
        receive = ws.receive

        async def receive_noted(timeout: float | None = None) -> Any:
            nonlocal heard
            msg = await receive(timeout)
            heard = loop.time()
            return msg

        ws.receive = receive_noted  # type: ignore[method-assign]  # the framework's only read
        self._set(True)
        serving = asyncio.ensure_future(run_ws(ws))
        why: str | None = None  # None: the worker is closing it (cancelled, or its channel shut)
        try:
            while True:
                await asyncio.wait({serving}, timeout=self.ping_s)
                if serving.done():
                    try:
                        return serving.result()
                    except Exception as exc:
                        why = f"its connection ended: {exc}"
                        raise
                quiet = loop.time() - heard
                if quiet >= self.silent_s:
                    why = f"LiveKit said nothing for {quiet:.1f} s, pinged every {self.ping_s:g} s"
                    raise ConnectionError(why)
                if quiet >= self.ping_s:
                    ping = agent.WorkerPing(timestamp=int(time.time() * 1000))
                    try:
                        await ws.send_bytes(agent.WorkerMessage(ping=ping).SerializeToString())
                    except ConnectionError as exc:
                        why = f"its connection ended: {exc}"
                        raise
        finally:
            self._set(False, why)
            if not serving.done():
                serving.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await serving
                # a hung server never sends its close frame: aiohttp would wait 10 s for it
                with contextlib.suppress(TimeoutError, Exception):
                    async with asyncio.timeout(CLOSE_S):
                        await ws.close()


class LinkedServer(AgentServer):
    """livekit-agents' ``AgentServer`` whose connection to LiveKit is watched by ``link``."""

    def __init__(self, link: Link, **options: Any) -> None:
        super().__init__(**options)
        self.link = link

    async def _run_ws(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        await self.link.serve(ws, super()._run_ws)
