"""The fake's webhook sender: signed POSTs to the app's callback URL, retried until delivered.

As Meta (``shared/reference/app-socket.md`` §2): each POST carries ``X-Hub-Signature-256``
over its raw body and ``Content-Type: application/json``; a delivery is at least once — a
connection error or any answer but a 2xx is retried, backing off from `retry_min_s` doubling to
`retry_max_s`, until delivered or older than `retry_for_s` (Meta keeps going for days). There is
no order and no sequence number: deliveries go one at a time in the order queued (`in_flight`
at once when the config says more than 1), and the faults below make them arrive twice or out of
order. Each attempt is kept (`Attempt`) with when it was made and how long its answer took.

Faults (`WebhookFaults`, counted down per webhook queued): send the next N twice (the same bytes,
as a retry whose answer was lost); hold the next N until the one after them is queued (so they
arrive after it); and `replay` any earlier delivery byte for byte.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from .config import WhatsAppConfig
from .wire import encode, signature

log = logging.getLogger(__name__)


@dataclass(kw_only=True)
class WebhookFaults:
    duplicate_next: int = 0
    """Send each of the next N webhooks twice."""
    reorder_next: int = 0
    """Hold each of the next N webhooks until the next one is queued, then send it after."""


@dataclass(frozen=True, kw_only=True)
class Delivery:
    """One webhook: its number (1, 2, …, in the order made), payload and exact bytes."""

    id: int
    payload: dict[str, Any]
    body: bytes


@dataclass(frozen=True, kw_only=True)
class Attempt:
    delivery: int
    status: int | None
    """The HTTP status answered; None: no answer (refused, reset, timed out)."""
    at: float = 0.0
    """When the POST began, ``time.monotonic()`` seconds."""
    queued_s: float = 0.0
    """Seconds from the delivery being queued to this POST (backoff included for a retry)."""
    took_s: float = 0.0
    """Seconds from the POST to its answer (or to its failure)."""


@dataclass
class WebhookSender:
    config: WhatsAppConfig
    url: str | None = None
    faults: WebhookFaults = field(default_factory=WebhookFaults)
    made: list[Delivery] = field(default_factory=list)
    attempts: list[Attempt] = field(default_factory=list)
    delivered: list[int] = field(default_factory=list)
    """Delivery ids answered 2xx, in the order they were (a twice-sent one twice)."""
    given_up: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.url = self.url or self.config.webhook_url
        self._queue: asyncio.Queue[tuple[Delivery, float]] = asyncio.Queue()
        self._held: list[Delivery] = []
        self._changed = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._session: aiohttp.ClientSession | None = None

    async def start(self) -> None:
        self._session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=10),
            connector=aiohttp.TCPConnector(limit=max(100, self.config.in_flight)),
        )
        self._tasks = [asyncio.create_task(self._run()) for _ in range(self.config.in_flight)]

    async def aclose(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._session is not None:
            await self._session.close()

    def send(self, payload: dict[str, Any]) -> Delivery:
        """Queue ``payload`` (faults applied); returns its delivery."""
        delivery = Delivery(id=len(self.made) + 1, payload=payload, body=encode(payload))
        self.made.append(delivery)
        f = self.faults
        if f.reorder_next > 0 and not self._held:
            f.reorder_next -= 1
            self._held.append(delivery)
            return delivery
        copies = 1
        if f.duplicate_next > 0:
            f.duplicate_next -= 1
            copies = 2
        for _ in range(copies):
            self._put(delivery)
        while self._held:
            self._put(self._held.pop(0))
        return delivery

    def replay(self, delivery_id: int) -> None:
        """Send delivery ``delivery_id`` again, byte for byte (Meta's retry of one it thought
        lost)."""
        self._put(self.made[delivery_id - 1])

    def release(self) -> None:
        """Send what a reorder fault holds now (nothing came after it)."""
        while self._held:
            self._put(self._held.pop(0))

    def _put(self, delivery: Delivery) -> None:
        self._queue.put_nowait((delivery, time.monotonic()))

    async def wait_delivered(self, n: int) -> None:
        """Return once ``n`` deliveries were answered 2xx (bound it with `asyncio.timeout`)."""
        while len(self.delivered) < n:
            self._changed.clear()
            await self._changed.wait()

    async def wait_attempts(self, n: int) -> None:
        """Return once ``n`` attempts were made, answered or not."""
        while len(self.attempts) < n:
            self._changed.clear()
            await self._changed.wait()

    @property
    def idle(self) -> bool:
        return self._queue.empty() and not self._held

    async def _run(self) -> None:
        while True:
            delivery, queued_at = await self._queue.get()
            await self._deliver(delivery, queued_at)

    async def _post(self, delivery: Delivery) -> int | None:
        assert self._session is not None
        if self.url is None:
            return None
        headers = {
            "Content-Type": "application/json",
            "X-Hub-Signature-256": signature(self.config.app_secret, delivery.body),
            "User-Agent": "facebookexternalua",
        }
        try:
            async with self._session.post(self.url, data=delivery.body, headers=headers) as resp:
                await resp.read()
                return resp.status
        except (aiohttp.ClientError, TimeoutError) as exc:
            log.info("whatsapp fake: webhook %d not delivered: %s", delivery.id, exc)
            return None

    async def _deliver(self, delivery: Delivery, queued_at: float) -> None:
        cfg = self.config
        wait = cfg.retry_min_s
        while True:
            at = time.monotonic()
            status = await self._post(delivery)
            took = time.monotonic() - at
            self.attempts.append(
                Attempt(
                    delivery=delivery.id, status=status, at=at, queued_s=at - queued_at,
                    took_s=took,
                )
            )  # fmt: skip
            if status is not None and 200 <= status < 300:
                self.delivered.append(delivery.id)
                self._changed.set()
                return
            self._changed.set()
            if time.monotonic() - queued_at + wait > cfg.retry_for_s:
                log.warning("whatsapp fake: webhook %d given up", delivery.id)
                self.given_up.append(delivery.id)
                return
            await asyncio.sleep(wait)  # Meta's backoff, not a test's wait
            wait = min(wait * 2, cfg.retry_max_s)
