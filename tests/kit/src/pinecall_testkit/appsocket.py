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
from pinecall_testkit.call_log import Keys, Listening, Process, bearer, listening, opening

if TYPE_CHECKING:
    from pinecall_call_log.service import CallLogService
    from pinecall_call_log.settings import CallLogSettings

Serve = Callable[..., AbstractAsyncContextManager[Listening]]
"""Start a call-log replica served on a real port (call-log's tests' ``serve`` fixture)."""
TOOL = {"id": "tc_1", "name": "book_slot", "arguments": {"day": "2026-12-02"}, "timeout_s": 30}
"""The tool call the tests' worker asks (``POST /v1/calls/{call}/tools``)."""
PATH = "/v1/apps/socket"
ACME = {"org": "org_acme"}
WAIT_S = 10.0
"""How long a test waits for a frame that must come (a failure, never a pace)."""


def call_log_settings(database_url: str, nats_url: str, nats_namespace: str) -> CallLogSettings:
    """A replica's settings on the test's database and NATS (text logs, a small pool)."""
    from pinecall_call_log.settings import CallLogSettings

    return CallLogSettings.from_env(
        {},
        database_url=database_url,
        nats_url=nats_url,
        nats_namespace=nats_namespace,
        log_format="text",
        db_pool_size=4,
        log_token_secret="a secret of the test",
    )


def serving(settings: CallLogSettings) -> Serve:
    """What a ``serve`` fixture gives: ``serve(**overrides)`` starts a replica of ``settings``
    (``overrides``: its other settings) served on a real port, which a WebSocket client dials
    (call-log's tests and the SDK's)."""
    import msgspec

    from pinecall_call_log.app import create_app

    def start(**overrides: object) -> AbstractAsyncContextManager[Listening]:
        return listening(create_app(msgspec.structs.replace(settings, **overrides)))

    return start


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
        frame = await self.next()
        assert frame["type"] == "pong.v1", frame

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


async def define(
    replica: Listening, keys: Keys, org: str = "org_acme", body: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Put an agent's definition (``support-bot``'s when ``body`` is None) with the app key;
    the version stored."""
    body = body or {"name": "support-bot", "prompt": "You answer the phone. Be brief."}
    answer = await replica.client.put(
        f"/v1/agents/{body['name']}", json=body, params={"org": org}, headers=bearer(keys.app)
    )
    assert answer.status_code == 200, answer.text
    stored: dict[str, Any] = answer.json()
    return stored


async def open_call(replica: Listening, keys: Keys, call: str = "call_1", **extra: object) -> None:
    """A worker opens ``call`` (``POST /v1/calls``; ``extra``: its other fields)."""
    answer = await replica.client.post(
        "/v1/calls", json=opening(call, **extra), headers=bearer(keys.production)
    )
    assert answer.status_code == 200, answer.text


def ask(
    replica: Listening, keys: Keys, call: str = "call_1", **tool: object
) -> asyncio.Task[dict[str, Any]]:
    """The worker asks a tool (:data:`TOOL`, ``tool``: its other fields); its POST waits for the
    answer, so this is a task."""

    async def asking() -> dict[str, Any]:
        answer = await replica.client.post(
            f"/v1/calls/{call}/tools", json=TOOL | tool, headers=bearer(keys.production)
        )
        assert answer.status_code == 200, answer.text
        body: dict[str, Any] = answer.json()
        return body

    return asyncio.create_task(asking(), name=f"asking {call}")


async def kinds(replica: Listening, keys: Keys, call: str = "call_1") -> list[str]:
    log = await replica.client.get(f"/v1/calls/{call}/entries", headers=bearer(keys.operator))
    return [e["kind"] for e in log.json()["entries"]]
