"""The worker's heartbeat: every 5 s from its start, to the roster, with its fleet key.

``{fleet, worker, agent_name, active, max_jobs, load, draining}`` and the last minute (seed 000,
"The gateway hears every worker"). A heartbeat that gets no answer is not retried: the next one is
5 s away and says everything again. The answer says whether the worker is cordoned. What the
roster must hear at once (LiveKit lost or regained the worker) calls :meth:`Heartbeat.wake`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

import httpx
import msgspec

from pinecall_contracts.base import decode, encode
from pinecall_contracts.fleet import HeartbeatReply, WorkerHeartbeat

_log = logging.getLogger(__name__)


class Heartbeat:
    """Posts ``state()`` every ``every_s`` seconds; hands each answer to ``on_reply``."""

    def __init__(
        self,
        client: httpx.AsyncClient,
        key: str | None,
        state: Callable[[], WorkerHeartbeat],
        on_reply: Callable[[HeartbeatReply], Awaitable[None]],
        *,
        every_s: float = 5.0,
    ) -> None:
        self.client = client
        self.key = key
        self.state = state
        self.on_reply = on_reply
        self.every_s = every_s
        self.sent = 0
        self.answered = 0
        self._woken = asyncio.Event()

    def wake(self) -> None:
        """Beat now instead of at the next tick (a change the roster must hear at once)."""
        self._woken.set()

    async def beat(self) -> HeartbeatReply | None:
        """One heartbeat; its answer, or None when the roster did not answer or refused."""
        headers = {"content-type": "application/json"}
        if self.key:
            headers["authorization"] = f"Bearer {self.key}"
        self.sent += 1
        try:
            r = await self.client.post(
                "/v1/fleet/heartbeat",
                content=encode(self.state()),
                headers=headers,
                timeout=self.every_s,
            )
        except httpx.HTTPError as exc:
            _log.warning("heartbeat: the roster did not answer: %r", exc)
            return None
        if r.status_code != 200:
            _log.error("heartbeat refused: %s %s", r.status_code, r.text[:300])
            return None
        try:
            reply = decode(r.content, HeartbeatReply)
        except msgspec.MsgspecError as exc:
            _log.error("heartbeat: a malformed answer: %s", exc)
            return None
        self.answered += 1
        await self.on_reply(reply)
        return reply

    async def run(self) -> None:
        """Beat until cancelled, the first at once, then every ``every_s`` or when woken."""
        while True:
            self._woken.clear()  # a wake during the beat is a change it may not carry: beat again
            await self.beat()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._woken.wait(), self.every_s)  # the cadence, or a wake
