"""Nothing Meta was told 200 for is lost (issue 17, "WhatsApp"): a chat replica process is
SIGKILLed right after it acknowledged a message (its model never answers, so it cannot have
answered it); another replica, started after, answers it, once, from the WhatsApp stream."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from pinecall_chat.whatsapp_wire import thread_call
from pinecall_contracts.subjects import Subjects
from pinecall_loadlab.vendors.config import AnthropicConfig, VendorsConfig
from pinecall_loadlab.vendors.server import VendorFakes
from pinecall_loadlab.whatsapp import WhatsAppConfig, WhatsAppFake
from pinecall_servicekit.bus import Bus
from pinecall_testkit.appsocket import App
from pinecall_testkit.appsocket import app as app_socket
from pinecall_testkit.call_log import Keys, Listening, bearer, replica_env, served

WAIT_S = 30.0
ANSWER_WAIT_S = 120.0
"""The second replica's first answer: its first item runs its first model request, the plugin's
and SDK's imports and clients made then; CI measured the replica's start alone at 19–42 s with
the suite's other process on the two cores, and 30 s after it was ready ran out three times."""


HEARTBEAT_S = 5.0
"""The app's ping period, in seconds (call-log closes a socket silent for two of its 15 s)."""


@contextlib.asynccontextmanager
async def beating(app: App) -> AsyncIterator[None]:
    """The app's heartbeat while the block runs, as the SDK's: a ``ping.v1`` every
    :data:`HEARTBEAT_S`, its ``pong.v1`` read. A silent app socket is closed after 30 s and
    nobody holds the agent then: a run as long (the second replica's start under load) had its
    message written waiting, never answered (CI; the agent log and ``apps.holding`` showed it)."""

    async def beat() -> None:
        while True:
            await app.send("ping.v1", t=1.0)
            while (await app.next())["type"] != "pong.v1":
                pass
            await asyncio.sleep(HEARTBEAT_S)  # the heartbeat's period, not a wait for an event

    task = asyncio.create_task(beat(), name="app-heartbeat")
    try:
        yield
    finally:
        task.cancel()
        [ended] = await asyncio.gather(task, return_exceptions=True)
        if not isinstance(ended, asyncio.CancelledError):
            raise AssertionError(f"the app's heartbeat stopped: {ended!r}")


@contextlib.asynccontextmanager
async def silent() -> AsyncIterator[str]:
    """A model URL that takes connections and never answers. Each connection it accepted is
    closed when its client goes (the killed replica's) or the block ends: Python 3.11's
    ``Server.close`` leaves accepted ones open, and a stream at EOF stays half open, so they
    were collected open in a later test (ResourceWarning, "unclosed transport", CI)."""
    held: set[asyncio.StreamWriter] = set()

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.add(writer)
        try:
            await reader.read(-1)
        finally:
            held.discard(writer)
            writer.close()

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.close()
        open_ = list(held)
        for writer in open_:
            writer.close()
        await asyncio.gather(*(w.wait_closed() for w in open_), return_exceptions=True)
        await server.wait_closed()


async def test_a_message_acknowledged_by_a_replica_killed_after_is_answered_once_by_another(
    call_log: Listening, dispatcher: Listening, keys: Keys,
    database_url: str, nats_url: str, nats_namespace: str,
) -> None:  # fmt: skip
    config = WhatsAppConfig(port=0, retry_min_s=0.05, retry_max_s=0.2, pair_interval_s=0.2)
    model = VendorsConfig(port=0, anthropic=AnthropicConfig(first_s=0.05, chunk_s=0.01))
    async with WhatsAppFake(config) as fake, VendorFakes(model) as fakes, silent() as nowhere:
        body = {"agent": "support-bot", "verify_token": "lab-verify-token",
                "app_secret": fake.config.app_secret, "access_token": fake.config.access_token}  # fmt: skip
        put = await call_log.client.put(
            f"/v1/whatsapp/numbers/{fake.number}", json=body, params={"org": "org_acme"},
            headers=bearer(keys.app),
        )  # fmt: skip
        assert put.status_code == 200, put.text
        env = replica_env(database_url, nats_url, nats_namespace)
        env = {k: v for k, v in env.items() if k != "PINECALL_LOG_TOKEN_SECRET"} | {
            "PINECALL_CALL_LOG_URL": call_log.url.replace("ws://", "http://"),
            "PINECALL_DISPATCHER_URL": dispatcher.url.replace("ws://", "http://"),
            "PINECALL_SERVICE_KEY": keys.service,
            "PINECALL_FLEET_KEYS": f"production={keys.production},sandbox={keys.sandbox}",
            "PINECALL_CHAT_TOKEN_SECRET": "the chat replicas' secret",
            "PINECALL_WHATSAPP_GRAPH_URL": fake.url,
            "PINECALL_WHATSAPP_PAIR_INTERVAL_S": "0.2",
            "PINECALL_WHATSAPP_ACK_WAIT_S": "1",
            "ANTHROPIC_API_KEY": "lab",
        }
        async with app_socket(call_log, keys) as app, contextlib.AsyncExitStack() as stack:
            await app.register()
            await stack.enter_async_context(beating(app))  # the test outlasts 30 s under load
            async with served(env | {"PINECALL_ANTHROPIC_URL": nowhere}, 1, service="chat") as [a]:
                fake.set_webhook_url(a.url + "/v1/whatsapp/webhook")
                sent = fake.contact("34600111222", name="Ana").send("are you open today")
                async with asyncio.timeout(WAIT_S):
                    await fake.webhooks.wait_delivered(1)  # a said 200
                a.kill()
                await a.proc.wait()
            ana = fake.contacts["34600111222"]
            assert ana.received == []
            b_env = env | {"PINECALL_ANTHROPIC_URL": fakes.anthropic_url}
            async with served(b_env, 1, service="chat") as [b]:
                fake.set_webhook_url(b.url + "/v1/whatsapp/webhook")
                async with asyncio.timeout(ANSWER_WAIT_S):
                    await ana.wait_received(1)
                    await fake.webhooks.wait_delivered(1 + 3)  # and the reply's statuses
                    await _stream_empty(nats_url, nats_namespace)
        wamid = sent.payload["entry"][0]["changes"][0]["value"]["messages"][0]["id"]
        got = await call_log.client.get(
            f"/v1/calls/{thread_call(fake.number, '34600111222', 1)}/entries",
            headers=bearer(keys.operator),
        )
        logged: list[dict[str, Any]] = got.json()["entries"]
    assert [e["data"]["message"] for e in logged if e["kind"] == "turn.user"] == [wamid]
    assert [e["data"]["reply_to"] for e in logged if e["kind"] == "turn.agent"] == [wamid]
    assert len(ana.received) == 1  # answered once
    assert len([e for e in logged if e["kind"] == "message.status"]) == 3


async def _stream_empty(nats_url: str, namespace: str) -> None:
    """Return once the WhatsApp stream holds nothing: every item processed and acknowledged."""
    bus = await Bus.connect(nats_url, namespace, name="test")
    try:
        stream = Subjects(namespace).whatsapp_stream
        while True:  # JetStream tells nobody when a stream empties: asked again
            if not (await bus.js.stream_info(stream)).state.messages:
                return
            await asyncio.sleep(0.05)
    finally:
        await bus.close()
