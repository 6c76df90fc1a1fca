"""Per-vendor state shared by each fake's handlers: its live config, its fault plan, and the count
of attempts it received (so a test can count a plugin's retries)."""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Generic, TypeVar

import msgspec
from aiohttp import web

from .config import Fault, VendorConfig

C = TypeVar("C", bound=VendorConfig)


class VendorState(Generic[C]):
    """One vendor's knobs, changeable while the server runs (the next attempt sees them)."""

    def __init__(self, config: C, stopping: asyncio.Event) -> None:
        self.config: C = config
        self.attempts = 0
        """Attempts received: handshakes, requests and (Cartesia) synthesis contexts."""
        self.faults_applied: list[Fault] = []
        self._plan: deque[Fault] = deque(config.faults)
        self._stopping = stopping
        self._counted = asyncio.Event()
        self.sockets: set[web.WebSocketResponse] = set()
        """Open WebSockets, closed when the server stops."""
        self.close_codes: list[int | None] = []
        """The close code of every WebSocket that ended, in order: the client's own when it
        closed it (1000: done with it), 1006 when its connection went without a close frame."""
        self._socket_ended = asyncio.Event()

    def configure(self, **changes: object) -> None:
        """Replace config fields (``first_s=1.2``); ``faults=[...]`` also resets the plan."""
        self.config = msgspec.structs.replace(self.config, **changes)
        if "faults" in changes:
            self._plan = deque(self.config.faults)

    def inject(self, *faults: Fault) -> None:
        """Append faults to the plan: the next attempts take them in order."""
        self._plan.extend(faults)

    def attempt(self, *, kinds: frozenset[str] | None = None, count: bool = True) -> Fault | None:
        """Count an attempt (unless not `count`) and take the next fault of the plan, if it is
        one of `kinds` (any kind when None)."""
        self.attempts += count
        self._counted.set()
        if self._plan and (kinds is None or self._plan[0].kind in kinds):
            fault = self._plan.popleft()
            self.faults_applied.append(fault)
            return fault
        return None

    def socket_ended(self, ws: web.WebSocketResponse) -> None:
        """Note that ``ws`` ended (its handler's last step)."""
        self.sockets.discard(ws)
        self.close_codes.append(ws.close_code)
        self._socket_ended.set()

    async def wait_sockets_closed(self) -> None:
        """Return once no WebSocket is open (bound it with ``asyncio.timeout``)."""
        while self.sockets:
            self._socket_ended.clear()
            await self._socket_ended.wait()

    async def wait_attempts(self, n: int) -> None:
        """Return once `n` attempts have arrived (bound it with `asyncio.timeout`)."""
        while self.attempts < n:
            self._counted.clear()
            await self._counted.wait()

    async def stall(self) -> None:
        """Say nothing until the server stops (the client's own timeout ends it first)."""
        await self._stopping.wait()


def status_response(fault: Fault, body: bytes, content_type: str) -> web.Response:
    """The refusal of an attempt: `fault.status`, with ``retry-after: 1`` on a 429."""
    headers = {"retry-after": "1"} if fault.status == 429 else {}
    return web.Response(status=fault.status, body=body, content_type=content_type, headers=headers)


def cut(request: web.Request) -> None:
    """Cut the TCP connection under `request` with no goodbye (no close frame, no last chunk)."""
    if request.transport is not None:
        request.transport.abort()
