"""The chat service against a call-log replica on real Postgres and NATS, both served on real
ports in the test's loop (the chat service reaches call-log over HTTP, the page and the app dial
real WebSockets); the model is a scripted one (:class:`Scripted`), so a test says what it
answers and which tool it asks."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import msgspec
import pytest
from livekit.agents.llm import ChatContext, FunctionCall

from pinecall_chat.app import create_app
from pinecall_chat.conversation import ChatAgent
from pinecall_chat.settings import ChatSettings
from pinecall_jobs.tools import AppTool
from pinecall_testkit.appsocket import call_log_settings, define, serving
from pinecall_testkit.call_log import Keys, Listening, listening, make_keys
from pinecall_testkit.dispatcher import dispatcher_app

SECRET = "a chat secret of the test"


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
