"""Simulated web visitors who chat with an agent over
``WS /v1/chat`` (issue 17, "In the main job"), as the page's chat box does.

Each visitor, ``rate`` a second, the environments in turn: its page's server mints a chat token
with the environment's app key (``POST /v1/chat/tokens``); it dials one of the chat replicas
(visitor *n* the *n*-th, in turn: there is no balancer), reads ``chat.ready``, then sends
``messages`` messages one at a time, ``pace_s`` apart, each with an id of its own (``v<n>-m<i>``),
reading ``chat.delta`` frames until the ``chat.reply`` to it. When its socket is cut (no close,
or a close it dials again after: 1001, 1011, 4503) it mints a token scoped to its call and
dials the next replica with ``?call=`` (a replica it cannot reach, or that answers 5xx, before
its call opened: the next one too, with no call), and sends the message it had no reply to again, with its
id (answered once: a replayed reply if it was answered before the cut). Any other close, or
more than ``most_cuts`` cuts, and it fails. Done, it closes its socket (1000) and goes quiet:
its call stays open until the reaper ends it ``timeout``.

Each change is a :class:`~pinecall_contracts.lab.ChatReport` line on ``--out``. Errors: a plan
that is not one is a usage error; a visitor never raises (its ``error`` says what went wrong).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import itertools
import time
from typing import IO, Any

import httpx
import msgspec
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake

from pinecall_contracts.base import encode
from pinecall_contracts.chat import (
    ChatClose,
    ChatDelta,
    ChatMessage,
    ChatReady,
    ChatReply,
    ChatToken,
    ToPage,
)
from pinecall_contracts.lab import ChatReport

DIAL_AGAIN = frozenset({ChatClose.GOING_AWAY, ChatClose.UNAVAILABLE, ChatClose.INTERNAL, 1006})
"""Closes after which a page dials again with ``?call=`` (``ChatClose``; 1006: no close at
all, the replica died)."""
LINES = (
    "Hello, do you have a table for two on Friday?",
    "Around eight in the evening, if you can.",
    "Great, please book it under the name Rivera.",
    "Thanks. Is there parking nearby?",
)
"""What the visitors write, in turn."""


class Environment(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    environment: str
    app_key: str
    """Mints the environment's chat tokens (a page's server's key)."""


class ChatPlan(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Who chats, where, how often, how many (a JSON file for ``lab chats --plan``)."""

    environments: list[Environment]
    chat_urls: list[str]
    """Every chat replica's base URL (``http://…``); visitors dial them in turn."""
    agent: str
    org: str
    chats: int
    """Visitors in all."""
    rate: float = 1.0
    """Visitors a second."""
    messages: int = 3
    """Messages each visitor sends."""
    pace_s: float = 1.0
    """Seconds between a reply and the visitor's next message."""
    reply_within_s: float = 60.0
    """How long a visitor waits for a reply before it fails."""
    most_cuts: int = 5
    """Cuts a visitor dials again after; one more and it fails."""


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class _Failed(Exception):
    """The visitor cannot go on (its message says why)."""


class _Busy(Exception):
    """The replica answered 5xx (it is stopping, or not ready): dial the next one."""


class Visitor:
    """Visitor ``n`` of ``plan`` in ``env``; :meth:`run` chats, :attr:`report` says how far."""

    def __init__(self, n: int, env: Environment, plan: ChatPlan, say: Any) -> None:
        self.n, self.env, self.plan, self._say = n, env, plan, say
        self.report = ChatReport(visitor=n, environment=env.environment, state="dialling")
        self.replica = n % len(plan.chat_urls)

    def said(self, **changes: Any) -> None:
        self.report = msgspec.structs.replace(self.report, **changes)
        self._say(self.report)

    async def run(self, http: httpx.AsyncClient) -> None:
        """Chat to the end, dialling again after each cut; never raises but ``CancelledError``
        (said ``stopped`` first)."""
        self.said(started_at=_now())
        ids = [f"v{self.n}-m{i}" for i in range(self.plan.messages)]
        try:
            while True:
                try:
                    await self._socket(http, ids)
                    self.said(state="done", ended_at=_now())
                    return
                except ConnectionClosed as exc:
                    code = exc.rcvd.code if exc.rcvd is not None else 1006
                    if code not in DIAL_AGAIN:
                        reason = exc.rcvd.reason if exc.rcvd is not None else ""
                        raise _Failed(f"closed {code}: {reason}") from None
                except (OSError, InvalidHandshake, TimeoutError, httpx.TransportError, _Busy):
                    pass  # the replica is gone, or going: the next one
                if self.report.cuts >= self.plan.most_cuts:
                    raise _Failed(f"cut {self.report.cuts + 1} times")
                self.said(cuts=self.report.cuts + 1)
                self.replica = (self.replica + 1) % len(self.plan.chat_urls)
                # a page's back-off before it dials again: 0.2 s, doubling (6.2 s in all)
                await asyncio.sleep(0.2 * 2 ** (self.report.cuts - 1))
        except _Failed as exc:
            self.said(state="failed", error=str(exc), ended_at=_now())
        except asyncio.CancelledError:
            self.said(state="stopped", error="stopped", ended_at=_now())
            raise

    async def _token(self, http: httpx.AsyncClient, base: str) -> str:
        body = {"agent": self.plan.agent, "org": self.plan.org, "visitor": f"visitor-{self.n}"}
        if self.report.call is not None:
            body["call"] = self.report.call
        answer = await http.post(
            f"{base}/v1/chat/tokens",
            json=body,
            headers={"Authorization": f"Bearer {self.env.app_key}"},
        )
        if answer.status_code >= 500:
            raise _Busy(f"chat token: {answer.status_code}")
        if answer.status_code != 200:
            raise _Failed(f"chat token: {answer.status_code} {answer.text[:200]}")
        return msgspec.json.decode(answer.content, type=ChatToken).token

    async def _socket(self, http: httpx.AsyncClient, ids: list[str]) -> None:
        """One socket: dial, then send what is left of ``ids`` (from the first unanswered)."""
        base = self.plan.chat_urls[self.replica]
        token = await self._token(http, base)
        url = f"ws{base.removeprefix('http')}/v1/chat?token={token}"
        if self.report.call is not None:
            url += f"&call={self.report.call}"
        async with connect(url, open_timeout=10, max_size=2**20) as ws:
            ready = msgspec.json.decode(await ws.recv(), type=ChatReady)
            self.said(
                state="chatting",
                call=ready.call,
                dials=self.report.dials + 1,
                resumed=self.report.resumed + ready.resumed,
            )
            for i, message in enumerate(ids):
                if message in self.report.answered:
                    continue
                if i and self.report.answered:
                    await asyncio.sleep(self.plan.pace_s)
                await self._exchange(ws, message, LINES[(self.n + i) % len(LINES)])
            await ws.close()

    async def _exchange(self, ws: ClientConnection, message: str, text: str) -> None:
        """Send ``message`` and read frames until its ``chat.reply``."""
        sent_at = time.monotonic()
        await ws.send(encode(ChatMessage(id=message, text=text)).decode())
        if message not in self.report.sent:
            self.said(sent=[*self.report.sent, message])
        started: float | None = None
        async with asyncio.timeout(self.plan.reply_within_s):
            while True:
                frame = msgspec.json.decode(await ws.recv(), type=ToPage)
                if isinstance(frame, ChatDelta) and frame.message == message:
                    started = started or time.monotonic() - sent_at
                elif isinstance(frame, ChatReply) and frame.message == message:
                    break
        replayed = frame.replayed
        self.said(
            answered=[*self.report.answered, message],
            replayed=self.report.replayed + replayed,
            reply_start_s=[*self.report.reply_start_s, *([round(started, 4)] if started else [])],
        )


async def chat(plan: ChatPlan, out: IO[bytes], stop: asyncio.Event) -> list[ChatReport]:
    """Run ``plan``'s visitors (``rate`` a second) until each is done or failed, or ``stop``
    (every visitor still chatting is then ``stopped``); their last reports."""

    def say(report: ChatReport) -> None:
        out.write(encode(report) + b"\n")
        out.flush()

    loop = asyncio.get_running_loop()
    start = loop.time()
    visitors: list[Visitor] = []
    tasks: set[asyncio.Task[None]] = set()
    environments = itertools.cycle(plan.environments)
    async with httpx.AsyncClient(timeout=10) as http:
        try:
            for n in range(plan.chats):
                with contextlib.suppress(TimeoutError):
                    # the schedule: visitor n at start + n / rate (a cadence, not an event)
                    async with asyncio.timeout_at(start + n / plan.rate):
                        await stop.wait()
                if stop.is_set():
                    break
                visitor = Visitor(n, next(environments), plan, say)
                visitors.append(visitor)
                task = asyncio.create_task(visitor.run(http), name=f"visitor-{n}")
                tasks.add(task)
                task.add_done_callback(tasks.discard)
            waiting = asyncio.ensure_future(stop.wait())
            try:
                while tasks and not stop.is_set():
                    await asyncio.wait({*tasks, waiting}, return_when="FIRST_COMPLETED")
            finally:
                waiting.cancel()
        finally:
            for task in list(tasks):
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    return [v.report for v in visitors]
