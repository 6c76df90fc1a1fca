"""The measures socket: job processes tell the worker's main process what their calls say.

The main process binds an ``AF_UNIX`` datagram socket and keeps the last minute of what arrives
(seed 000, "A worker that is up but bad", ``fleet/measures.py``); each job process sends one
datagram per measure (:func:`report`). Datagrams on one machine are not lost while the reader keeps
up, and a measure lost under pressure costs one sample of a minute, never a call: :func:`report`
never raises.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import cast

import msgspec

from pinecall_contracts.worker import CallEnded, CallError, Measure, TurnMeasured
from pinecall_worker.domain import Minute
from pinecall_worker.metrics import WorkerMetrics

_log = logging.getLogger(__name__)
_decoder = msgspec.json.Decoder(Measure)
_encoder = msgspec.json.Encoder()


class MeasuresSocket(asyncio.DatagramProtocol):
    """The main process's end: every measure received goes into :attr:`minute`."""

    def __init__(self, path: Path, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.path = path
        self.minute = Minute()
        self.clock = clock
        self.received = 0
        self._ended: dict[str, float] = {}
        """The calls whose end the minute counted, with when: each is counted once, whether the
        job said it or the main process did for a job that died."""
        self._transport: asyncio.DatagramTransport | None = None
        self._closed = asyncio.Event()
        self.arrived = asyncio.Event()
        """Set on each datagram (cleared by whoever waits for the next)."""
        self.on_ended: Callable[[], None] | None = None
        """Called when a call's end is counted: its seat is free."""
        self.metrics: WorkerMetrics | None = None
        """Counts each measure for ``/metrics`` too, when set."""

    async def start(self) -> None:
        """Bind the socket at :attr:`path` (a stale file of a dead process is replaced)."""
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        loop = asyncio.get_running_loop()
        await loop.create_datagram_endpoint(
            lambda: self, local_addr=str(self.path), family=socket.AF_UNIX
        )

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: object) -> None:
        try:
            measure = _decoder.decode(data)
        except msgspec.MsgspecError as exc:
            _log.warning("a malformed measure: %s", exc)
            return
        now = self.clock()
        if isinstance(measure, TurnMeasured):
            self.minute.turn(now, measure.first_audio_s)
            if self.metrics is not None:
                self.metrics.turn(measure.first_audio_s)
        elif isinstance(measure, CallError):
            self.minute.error(now)
            if self.metrics is not None:
                self.metrics.error()
        elif isinstance(measure, CallEnded):
            self.call_ended(measure.call, measure.failed)
        self.received += 1
        self.arrived.set()

    def call_ended(self, call: str, failed: bool) -> bool:
        """Count ``call``'s end in the minute unless it was counted; True if this counted it."""
        now = self.clock()
        edge = now - self.minute.window_s
        for old in [c for c, at in self._ended.items() if at < edge]:
            del self._ended[old]
        if call in self._ended:
            return False
        self._ended[call] = now
        self.minute.ended(now, failed)
        if self.metrics is not None:
            self.metrics.ended(failed)
        if self.on_ended is not None:
            self.on_ended()
        return True

    def heard_ended(self, call: str) -> bool:
        """Whether ``call``'s end was counted in the last minute."""
        at = self._ended.get(call)
        return at is not None and at >= self.clock() - self.minute.window_s

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed.set()

    async def close(self) -> None:
        """Close the socket (awaiting the transport's end) and remove its file."""
        if self._transport is not None:
            self._transport.close()
            await self._closed.wait()
            self._transport = None
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


def report(path: str | Path | None, measure: TurnMeasured | CallError | CallEnded) -> None:
    """Send ``measure`` to the worker at ``path`` from a job process; never raises."""
    if not path:
        return
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.setblocking(False)
            sock.sendto(_encoder.encode(measure), str(path))
    except OSError as exc:
        _log.debug("a measure not sent to %s: %s", path, exc)
