"""LiveKit's webhook notifier: signed protojson POSTs, one ordered queue per room and URL.

Follows `PR:webhook/resource_url_notifier.go` and `PR:webhook/notifier.go`:

- body: the `WebhookEvent` as protojson (camelCase, enums by name, int64 as strings, defaults
  omitted), compact; ``Authorization: <jwt>`` (no Bearer) carrying the body's sha256;
  ``Content-Type: application/webhook+json``; ``User-Agent: LiveKit``;
- one FIFO queue per (URL, room name), at most 200 deep; an event queued longer than
  `webhook_max_age_s` is dropped; connection errors and 5xx are retried with exponential backoff
  (go-retryablehttp's defaults: 4 retries, 1–30 s); a 4xx is final.

Faults (stand-in only, `WebhookFaults`): drop, duplicate, delay and reorder events on command, and
lose some events of some rooms for good (`lose`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from dataclasses import dataclass, field

import aiohttp
from google.protobuf.json_format import MessageToDict
from livekit.protocol import webhook

from . import events as ev
from . import ids
from .config import StandInConfig
from .tokens import KeyRing

log = logging.getLogger(__name__)

MAX_DEPTH = 200


@dataclass(kw_only=True)
class WebhookFaults:
    """Faults applied to events as they are queued, counted down per event."""

    drop_next: int = 0
    """Drop the next N events (never sent)."""
    duplicate_next: int = 0
    """Send each of the next N events twice (same id)."""
    reorder_next: int = 0
    """Hold each of the next N events until the room's following event has been queued."""
    delay_s: float = 0.0
    """Hold every event this long before its first attempt (counts toward the 30 s age)."""
    lose: dict[str, set[str]] = field(default_factory=dict)
    """Room name → event names never sent for that room (``{"call-1": {"participant_left",
    "room_finished"}}``): webhooks LiveKit lost, which only the reaper's reads make up for."""


def encode(event: webhook.WebhookEvent) -> bytes:
    """The exact body bytes: compact protojson, as LiveKit marshals it."""
    return json.dumps(MessageToDict(event), separators=(",", ":")).encode()


@dataclass
class _Queued:
    event: webhook.WebhookEvent
    queued_at: float


class WebhookNotifier:
    """Queues, signs and delivers webhooks to every configured URL."""

    def __init__(self, config: StandInConfig, keys: KeyRing, log_: ev.EventLog) -> None:
        self.config = config
        self.keys = keys
        self.events = log_
        self.urls = list(config.webhook_urls)
        self.faults = WebhookFaults()
        self._queues: dict[tuple[str, str], asyncio.Queue[_Queued]] = {}
        self._tasks: dict[tuple[str, str], asyncio.Task[None]] = {}
        self._held: dict[str, webhook.WebhookEvent] = {}
        self._session: aiohttp.ClientSession | None = None

    async def start(self) -> None:
        self._session = aiohttp.ClientSession()

    async def aclose(self) -> None:
        for task in self._tasks.values():
            task.cancel()
        await asyncio.gather(*self._tasks.values(), return_exceptions=True)
        if self._session is not None:
            await self._session.close()

    async def drain(self) -> None:
        """Wait until every queued event was delivered or dropped."""
        await asyncio.gather(*(q.join() for q in self._queues.values()))

    def notify(self, event: webhook.WebhookEvent) -> None:
        """Stamp `event` (``EV_…`` id, unix-seconds created_at) and queue it for every URL."""
        event.id = ids.new_id(ids.EVENT)
        event.created_at = int(time.time())
        key = event.room.name or event.participant.identity
        f = self.faults
        if event.event in f.lose.get(event.room.name, ()):
            for url in self.urls:
                self._dropped(event, url, "fault: lost")
            return
        if f.drop_next > 0:
            f.drop_next -= 1
            for url in self.urls:
                self._dropped(event, url, "fault: dropped")
            return
        copies = 1
        if f.duplicate_next > 0:
            f.duplicate_next -= 1
            copies = 2
        if f.reorder_next > 0 and key not in self._held:
            f.reorder_next -= 1
            self._held[key] = event
            return
        for _ in range(copies):
            self._enqueue(key, event)
        if (held := self._held.pop(key, None)) is not None:
            self._enqueue(key, held)

    def _enqueue(self, key: str, event: webhook.WebhookEvent) -> None:
        for url in self.urls:
            qkey = (url, key)
            queue = self._queues.get(qkey)
            if queue is None:
                queue = self._queues[qkey] = asyncio.Queue(MAX_DEPTH)
                self._tasks[qkey] = asyncio.create_task(self._run(url, queue))
            try:
                queue.put_nowait(_Queued(event, time.monotonic()))
            except asyncio.QueueFull:
                self._dropped(event, url, "queue full")

    async def _run(self, url: str, queue: asyncio.Queue[_Queued]) -> None:
        while True:
            item = await queue.get()
            try:
                if self.faults.delay_s > 0:
                    await asyncio.sleep(self.faults.delay_s)
                await self._deliver(url, item)
            finally:
                queue.task_done()

    async def _deliver(self, url: str, item: _Queued) -> None:
        cfg = self.config
        body = encode(item.event)
        backoff = cfg.webhook_backoff_min_s
        for attempt in range(cfg.webhook_retries + 1):
            if time.monotonic() - item.queued_at > cfg.webhook_max_age_s:
                self._dropped(item.event, url, "too old")
                return
            status = await self._post(url, body)
            if status is not None and status < 500:
                self.events.append(
                    ev.WebhookDelivered(
                        event_id=item.event.id, event=item.event.event, url=url, status=status
                    )
                )
                return
            if attempt < cfg.webhook_retries:
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, cfg.webhook_backoff_max_s)
        self._dropped(item.event, url, "retries exhausted")

    async def _post(self, url: str, body: bytes) -> int | None:
        assert self._session is not None
        headers = {
            "Authorization": self.keys.mint_webhook_token(body),
            "Content-Type": "application/webhook+json",
            "User-Agent": "LiveKit",
        }
        timeout = aiohttp.ClientTimeout(total=self.config.webhook_attempt_timeout_s)
        with contextlib.suppress(aiohttp.ClientError, TimeoutError):
            async with self._session.post(url, data=body, headers=headers, timeout=timeout) as r:
                await r.read()
                return r.status
        return None

    def _dropped(self, event: webhook.WebhookEvent, url: str, why: str) -> None:
        log.info("webhook %s %s to %s dropped: %s", event.event, event.id, url, why)
        self.events.append(
            ev.WebhookDropped(event_id=event.id, event=event.event, url=url, why=why)
        )
