"""The app's socket, kept open: connect (stamina's backoff while nobody answers), read frames in
order, ping, and connect again when a close can be mended (:mod:`pinecall.link` says which).

Each socket is one :class:`~pinecall.link.Link`; the app is told when one opens (to register
its agents), of every frame it reads, and when it goes (to let go of what it held on it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

import msgspec
import stamina
from websockets.exceptions import ConnectionClosed

from pinecall.errors import Refused
from pinecall.link import DECODER, SDK, Link, closed, open_link, retryable
from pinecall_contracts.appsocket import FromApp, Hello, Ping, Pong, ToApp
from pinecall_contracts.base import encode

log = logging.getLogger("pinecall")

Opened = Callable[[Link], Awaitable[None]]
Heard = Callable[[ToApp], Awaitable[None]]
Lost = Callable[[Link], Awaitable[None]]


class Connection:
    """One app process's socket to ``url``, opened again whenever it goes, until :meth:`close`."""

    def __init__(
        self,
        url: str,
        key: str,
        hello: Hello,
        *,
        wait_max_s: float,
        opened: Opened,
        heard: Heard,
        lost: Lost,
    ) -> None:
        self.url = url
        self._key = key
        self._hello = hello
        self._wait_max_s = wait_max_s
        self._opened, self._heard, self._lost = opened, heard, lost
        self.link: Link | None = None
        """The socket open now (it heard ``welcome``), if any."""
        self.pongs = 0
        """Pings answered on the socket open now."""
        self.stop = asyncio.Event()
        """Set: connect no more (the socket open now is kept until it closes)."""

    async def hold(self) -> None:
        """Keep a socket open until :attr:`stop`; raises the ``Refused`` or ``BadURL`` that
        connecting again would meet again."""
        while not self.stop.is_set():
            link = await self._connect()
            if link is None:
                return
            self.link, self.pongs = link, 0
            try:
                await self._serve(link)
            finally:
                self.link = None
                await self._lost(link)
                with contextlib.suppress(Exception):  # it is gone already
                    await link.ws.close()

    async def send(self, frame: FromApp) -> bool:
        """Send ``frame`` on the socket open now; False when there is none."""
        link = self.link
        if link is None:
            return False
        try:
            await link.ws.send(encode(frame).decode())
        except ConnectionClosed:
            return False
        return True

    async def close(self) -> None:
        """Connect no more and close the socket open now (1000)."""
        self.stop.set()
        if self.link is not None:
            await self.link.ws.close()

    async def _connect(self) -> Link | None:
        """A socket that heard ``welcome``, tried again with backoff; None once stopped."""
        attempts = asyncio.create_task(self._attempts(), name="pinecall-connect")
        stop = asyncio.create_task(self.stop.wait(), name="pinecall-stop")
        await asyncio.wait({attempts, stop}, return_when=asyncio.FIRST_COMPLETED)
        stop.cancel()
        if not attempts.done():
            attempts.cancel()
        try:
            link = await attempts
        except asyncio.CancelledError:
            return None
        if self.stop.is_set():
            await link.ws.close()
            return None
        return link

    async def _attempts(self) -> Link:
        async for attempt in stamina.retry_context(
            on=retryable, attempts=None, timeout=None, wait_max=self._wait_max_s
        ):
            with attempt:
                return await open_link(self.url, self._key, self._hello, SDK)
        raise AssertionError("stamina stops retrying only by raising")

    async def _serve(self, link: Link) -> None:
        """Tell the app, then read frames until the socket closes; returns when a reconnect may
        mend the close, raises the ``Refused`` a reconnect would meet again."""
        instance = self._hello.instance
        log.info("app %s connected to %s (replica %s)", instance, self.url, link.welcome.replica)
        heartbeat = asyncio.create_task(self._heartbeat(link), name="pinecall-heartbeat")
        try:
            await self._opened(link)
            while True:
                message = await link.ws.recv()
                if isinstance(message, str):
                    await self._frame(message)
        except ConnectionClosed as exc:
            ended = closed(exc)
        finally:
            heartbeat.cancel()
        if isinstance(ended, Refused):
            raise ended
        if not self.stop.is_set():
            log.warning("app %s: %s: connecting again", instance, ended)

    async def _frame(self, text: str) -> None:
        try:
            frame = DECODER.decode(text)
        except msgspec.MsgspecError as exc:  # a frame a newer server added: not ours to read
            log.debug("a frame this SDK does not read: %s", exc)
            return
        if isinstance(frame, Pong):
            self.pongs += 1
        try:
            await self._heard(frame)
        except Exception:  # a defect of ours: said, and the next frame read
            log.exception("app %s: a frame failed: %.200s", self._hello.instance, text)

    async def _heartbeat(self, link: Link) -> None:
        """A ``ping`` every half ``heartbeat_s``: the server closes after two silent ones."""
        while True:
            await asyncio.sleep(link.welcome.heartbeat_s / 2)
            with contextlib.suppress(ConnectionClosed):
                await link.ws.send(encode(Ping(t=time.time())).decode())
