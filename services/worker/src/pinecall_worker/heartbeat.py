"""The worker's heartbeat: every 5 s from its start, to the roster, with its fleet key, through
the roster's client (:class:`pinecall_clients.roster.RosterClient`, over HTTP).

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

from pinecall_clients.errors import RosterRefused, RosterUnavailable
from pinecall_clients.roster import RosterClient
from pinecall_contracts.fleet import HeartbeatReply, WorkerHeartbeat

_log = logging.getLogger(__name__)


class Heartbeat:
    """Posts ``state()`` every ``every_s`` seconds through ``roster`` (with the worker's fleet
    key); hands each answer to ``on_reply``."""

    def __init__(
        self,
        roster: RosterClient,
        state: Callable[[], WorkerHeartbeat],
        on_reply: Callable[[HeartbeatReply], Awaitable[None]],
        *,
        every_s: float = 5.0,
    ) -> None:
        self.roster = roster
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
        self.sent += 1
        try:
            reply = await self.roster.heartbeat(self.state(), timeout_s=self.every_s)
        except RosterUnavailable as exc:
            _log.warning("heartbeat: the roster did not answer: %s", exc)
            return None
        except RosterRefused as exc:
            _log.error("heartbeat refused: %s", exc)
            return None
        self.answered += 1
        await self.on_reply(reply)
        return reply

    async def run(self) -> None:
        """Beat until cancelled, the first at once, then every ``every_s`` or when woken.

        The wait is ``asyncio.timeout``'s, not ``wait_for``'s: Python 3.11's ``wait_for`` drops
        a cancellation that comes in the turn a wake does (CPython gh-86296), and the beats would
        go on after the worker stopped (``pinecall_servicekit.stream.fetch_one``)."""
        while True:
            self._woken.clear()  # a wake during the beat is a change it may not carry: beat again
            await self.beat()
            with contextlib.suppress(TimeoutError):  # the cadence, or a wake
                async with asyncio.timeout(self.every_s):
                    await self._woken.wait()
