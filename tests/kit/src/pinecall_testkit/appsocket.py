"""An app process as the app socket's tests play it: a real WebSocket client (``websockets``) that
says hello, registers agents and reads frames in order."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from pinecall_contracts.appsocket import SUBPROTOCOL
from pinecall_testkit.call_log import Keys, Listening, Process, bearer

if TYPE_CHECKING:
    from pinecall_call_log.service import CallLogService

Serve = Callable[..., AbstractAsyncContextManager[Listening]]
"""Start a call-log replica served on a real port (call-log's tests' ``serve`` fixture)."""
TOOL = {"id": "tc_1", "name": "book_slot", "arguments": {"day": "2026-12-02"}, "timeout_s": 30}
"""The tool call the tests' worker asks (``POST /v1/calls/{call}/tools``)."""
PATH = "/v1/apps/socket"
ACME = {"org": "org_acme"}
WAIT_S = 10.0
"""How long a test waits for a frame that must come (a failure, never a pace)."""


def service(replica: Listening) -> CallLogService:
    """The replica's call log (its hub at ``.hub``)."""
    found: CallLogService = replica.client.app.state.call_log
    return found


class App:
    """One app process's socket."""

    def __init__(self, ws: ClientConnection, instance: str) -> None:
        self.ws = ws
        self.instance = instance

    async def send(self, tag: str, /, **fields: Any) -> None:
        """A frame of type ``tag`` with ``fields``."""
        await self.ws.send(json.dumps({"type": tag, **fields}))

    async def next(self) -> dict[str, Any]:
        """The next frame (``TimeoutError`` when none comes)."""
        frame: dict[str, Any] = json.loads(await asyncio.wait_for(self.ws.recv(), WAIT_S))
        return frame

    async def expect(self, kind: str) -> dict[str, Any]:
        frame = await self.next()
        assert frame["type"] == kind, frame
        return frame

    async def register(self, agent: str = "support-bot", *, takes_unclaimed: bool = True) -> int:
        """Register ``agent``; the number of parked calls that follow."""
        await self.send("agent.register.v1", agent=agent, takes_unclaimed=takes_unclaimed)
        return int((await self.expect("agent.registered.v1"))["parked"])

    async def nothing_queued(self) -> None:
        """Ping: the pong comes first, so nothing was queued for this socket before it."""
        await self.send("ping.v1", t=1.0)
        assert (await self.next())["type"] == "pong.v1"

    async def closed_with(self) -> int:
        """The close code the server closed this socket with."""
        try:
            while True:
                await asyncio.wait_for(self.ws.recv(), WAIT_S)
        except ConnectionClosed as closed:
            rcvd = closed.rcvd
        assert rcvd is not None, "the server sent no close frame"
        return rcvd.code

    def kill(self) -> None:
        """The process dies: the TCP connection drops, no close frame."""
        self.ws.transport.abort()


@asynccontextmanager
async def dial(
    replica: Listening | Process,
    key: str | None,
    *,
    subprotocol: str = SUBPROTOCOL,
) -> AsyncIterator[ClientConnection]:
    """A WebSocket to the replica's app socket (an in-process one, or a replica process: its
    ``http://`` URL dialled as ``ws://``)."""
    headers = bearer(key) if key else {}
    async with connect(
        replica.url.replace("http://", "ws://", 1) + PATH,
        subprotocols=[subprotocol],  # type: ignore[list-item]
        additional_headers=headers,
    ) as ws:
        yield ws


@asynccontextmanager
async def app(
    replica: Listening | Process, keys: Keys, instance: str = "app-1", org: str = "org_acme"
) -> AsyncIterator[App]:
    """An app process that said hello and heard welcome."""
    async with dial(replica, keys.app) as ws:
        one = App(ws, instance)
        await one.send("hello.v1", versions=[1], instance=instance, org=org)
        await one.expect("welcome.v1")
        yield one


async def define(replica: Listening, keys: Keys, org: str = "org_acme") -> None:
    body = {"name": "support-bot", "prompt": "You answer the phone. Be brief."}
    answer = await replica.client.put(
        "/v1/agents/support-bot", json=body, params={"org": org}, headers=bearer(keys.app)
    )
    assert answer.status_code == 200, answer.text


async def kinds(replica: Listening, keys: Keys, call: str = "call_1") -> list[str]:
    log = await replica.client.get(f"/v1/calls/{call}/entries", headers=bearer(keys.operator))
    return [e["kind"] for e in log.json()["entries"]]
