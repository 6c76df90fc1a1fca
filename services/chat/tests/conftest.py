"""The chat service against a call-log replica on real Postgres and NATS, both served on real
ports in the test's loop (the chat service reaches call-log over HTTP, the page and the app dial
real WebSockets); the model is a scripted one (:class:`Scripted`), so a test says what it
answers and which tool it asks."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import msgspec
import pytest
from livekit.agents.llm import ChatContext, FunctionCall

from pinecall_chat.app import create_app
from pinecall_chat.conversation import ChatAgent
from pinecall_chat.settings import ChatSettings
from pinecall_chat.whatsapp import WhatsApp
from pinecall_jobs.tools import AppTool
from pinecall_loadlab.whatsapp import WhatsAppConfig, WhatsAppFake
from pinecall_testkit.appsocket import call_log_settings, define, serving
from pinecall_testkit.call_log import Keys, Listening, bearer, listening, make_keys
from pinecall_testkit.dispatcher import dispatcher_app

SECRET = "a chat secret of the test"
Chat = Callable[..., AbstractAsyncContextManager[Listening]]
"""The ``chat`` fixture: ``chat(**overrides)`` serves a replica."""


class Scripted:
    """A model that answers ``You said: <last message>`` in three deltas; a message holding
    ``book`` asks the agent's first tool first (once), then answers with its output."""

    def __init__(self) -> None:
        self.asked = 0
        self.gate: Any = None
        """An ``asyncio.Event`` the reply waits on after its first delta (a test cuts it)."""

    async def stream(
        self, agent: ChatAgent, context: ChatContext, tools: list[AppTool]
    ) -> AsyncIterator[str | FunctionCall]:
        items = context.items
        last = items[-1]
        if getattr(last, "type", "") == "function_call_output":
            yield f"Done: {last.output}"  # type: ignore[union-attr]
            return
        said = last.text_content or ""  # type: ignore[union-attr]
        if "book" in said and tools:
            self.asked += 1
            yield FunctionCall(
                call_id=f"tc_{self.asked}", name=agent.tools[0].name, arguments='{"day": "monday"}'
            )
            return
        yield "You "
        if self.gate is not None:
            await self.gate.wait()
        yield "said: "
        yield said


@pytest.fixture
async def keys(database_url: str) -> Keys:
    return await make_keys(database_url)


@pytest.fixture
async def call_log(
    database_url: str, nats_url: str, nats_namespace: str, keys: Keys
) -> AsyncIterator[Listening]:
    serve = serving(call_log_settings(database_url, nats_url, nats_namespace))
    async with serve() as r:
        tool = {
            "name": "book_slot",
            "description": "Book a slot",
            "parameters": {"type": "object", "properties": {"day": {"type": "string"}}},
            "timeout_s": 10,
        }
        await define(
            r, keys, body={"name": "support-bot", "prompt": "You chat. Be brief.", "tools": [tool]}
        )
        yield r


@pytest.fixture
def chat_settings(
    database_url: str, nats_url: str, nats_namespace: str, keys: Keys, call_log: Listening
) -> ChatSettings:
    return ChatSettings.from_env(
        {},
        database_url=database_url,
        nats_url=nats_url,
        nats_namespace=nats_namespace,
        call_log_url=call_log.url.replace("ws://", "http://"),
        fleet_keys=f"production={keys.production},sandbox={keys.sandbox}",
        chat_token_secret=SECRET,
        chat_max_message_chars=100,
        chat_max_frame_bytes=1024,
        log_format="text",
    )


@pytest.fixture
def model() -> Scripted:
    return Scripted()


@pytest.fixture
def chat(
    chat_settings: ChatSettings, model: Scripted
) -> Callable[..., AbstractAsyncContextManager[Listening]]:
    """``chat(**overrides)``: a chat replica served on a real port (two may run at once)."""

    def start(**overrides: object) -> AbstractAsyncContextManager[Listening]:
        return listening(
            create_app(msgspec.structs.replace(chat_settings, **overrides), model=model)
        )

    return start


@pytest.fixture
async def dispatcher(
    database_url: str, nats_url: str, nats_namespace: str, keys: Keys, call_log: Listening
) -> AsyncIterator[Listening]:
    """A dispatcher served on a real port (the chat service admits its written calls there)."""
    app = dispatcher_app(
        database_url,
        nats_url,
        nats_namespace,
        call_log_url=call_log.url.replace("ws://", "http://"),
        service_key=keys.service,
        agent_cache_s=0.0,
    )
    async with listening(app) as served:
        yield served


# -- WhatsApp: Meta's Cloud API fake, a number of org_acme on it, a replica that delivers to ---

WAIT_S = 15.0
PACE_S = 0.2
"""The pair rate of these tests, in seconds: the fake's and the chat's."""
VERIFY = "lab-verify-token"
ACME = {"org": "org_acme"}


@pytest.fixture
async def fake() -> AsyncIterator[WhatsAppFake]:
    config = WhatsAppConfig(port=0, retry_min_s=0.05, retry_max_s=0.2, pair_interval_s=PACE_S)
    async with WhatsAppFake(config) as wa:
        yield wa


@pytest.fixture
async def number(call_log: Listening, keys: Keys, fake: WhatsAppFake) -> str:
    """The fake's number, tied to ``support-bot`` of org_acme in production."""
    body = {"agent": "support-bot", "verify_token": VERIFY,
            "app_secret": fake.config.app_secret, "access_token": fake.config.access_token}  # fmt: skip
    put = await call_log.client.put(
        f"/v1/whatsapp/numbers/{fake.number}", json=body, params=ACME, headers=bearer(keys.app)
    )
    assert put.status_code == 200, put.text
    return fake.number


class Clock:
    """The chat's clock, moved with the fake's."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset


@pytest.fixture
def replica(chat: Chat, keys: Keys, fake: WhatsAppFake, dispatcher: Listening) -> Callable[[], Any]:
    """A chat replica as production runs one: a thread's call admitted by the dispatcher."""

    def start() -> AbstractAsyncContextManager[Listening]:
        return chat(
            service_key=keys.service,
            dispatcher_url=dispatcher.url.replace("ws://", "http://"),
            whatsapp_graph_url=fake.url,
            whatsapp_pair_interval_s=PACE_S,
        )

    return start


def whatsapp_of(one: Listening) -> WhatsApp:
    wa: WhatsApp = one.client.app.state.whatsapp
    return wa


def hook_url(one: Listening) -> str:
    return one.url.replace("ws://", "http://") + "/v1/whatsapp/webhook"


async def call_entries(call_log: Listening, keys: Keys, call: str) -> list[dict[str, Any]]:
    got = await call_log.client.get(f"/v1/calls/{call}/entries", headers=bearer(keys.operator))
    assert got.status_code == 200, got.text
    entries: list[dict[str, Any]] = got.json()["entries"]
    return entries


async def agent_log(call_log: Listening, keys: Keys) -> list[dict[str, Any]]:
    got = await call_log.client.get(
        "/v1/agents/support-bot/log",
        params={"environment": "production"},
        headers=bearer(keys.operator),
    )
    entries: list[dict[str, Any]] = got.json()["entries"]
    return entries


async def open_calls(call_log: Listening, keys: Keys) -> list[dict[str, Any]]:
    got = await call_log.client.get("/v1/calls", headers=bearer(keys.operator))
    calls: list[dict[str, Any]] = got.json()["calls"]
    return calls
