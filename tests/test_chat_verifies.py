"""A chat's log verifies as a voice call's does (issue 17, acceptance 1): a chat runs its agent's
prompt and tools on the real model path (livekit-agents' Anthropic plugin against the load lab's
Anthropic fake, which asks the agent's tool on every other turn), the app answers the tools over
the app socket, the reaper's way of ending a quiet chat (``timeout``, sealed) ends it, and the log
read back passes the verification ``up`` applies to every call (``pinecall_runtime.up.report``):
sealed, seqs without a gap, the writer's entries counted once each, in order. A written call has
no room and no worker's seat; nothing of the verification needs one."""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

from websockets.asyncio.client import connect

from pinecall_chat.app import create_app as chat_app
from pinecall_chat.settings import ChatSettings
from pinecall_clients.calllog import CallLogClient
from pinecall_loadlab.vendors.config import AnthropicConfig, VendorsConfig
from pinecall_loadlab.vendors.server import VendorFakes
from pinecall_runtime.up.report import verify
from pinecall_testkit.appsocket import App, app, call_log_settings, define, serving
from pinecall_testkit.call_log import Keys, bearer, listening, make_keys

TOOL = {
    "name": "book_table",
    "description": "Book a table",
    "parameters": {
        "type": "object",
        "properties": {"day": {"type": "string", "examples": ["friday"]}},
    },
    "timeout_s": 10,
}


async def answering(one: App, asked: list[str]) -> None:
    while True:
        try:
            frame = await one.next()
        except TimeoutError:
            continue
        if frame["type"] == "tool.call.v1":
            asked.append(frame["id"])
            await one.send("tool.result.v1", call=frame["call"], id=frame["id"], result="booked")


async def test_a_chats_log_verifies_as_a_voice_calls_does(
    database_url: str, nats_url: str, nats_namespace: str
) -> None:
    keys: Keys = await make_keys(database_url)
    fast = VendorsConfig(
        port=0, anthropic=AnthropicConfig(first_s=0.01, chunk_s=0.01, tool_share=0.5)
    )
    serve = serving(call_log_settings(database_url, nats_url, nats_namespace))
    async with serve() as log, VendorFakes(fast) as fakes:
        await define(
            log, keys, body={"name": "support-bot", "prompt": "You chat.", "tools": [TOOL]}
        )
        settings = ChatSettings.from_env(
            {},
            database_url=database_url,
            nats_url=nats_url,
            nats_namespace=nats_namespace,
            call_log_url=log.url.replace("ws://", "http://"),
            fleet_keys=f"production={keys.production},sandbox={keys.sandbox}",
            chat_token_secret="a chat secret",
            anthropic_url=fakes.anthropic_url,
            anthropic_api_key="lab",
            log_format="text",
        )
        asked: list[str] = []
        async with listening(chat_app(settings)) as chat, app(log, keys) as one:
            await one.register()
            heard = asyncio.create_task(answering(one, asked))
            minted = await chat.client.post(
                "/v1/chat/tokens",
                json={"agent": "support-bot", "org": "org_acme"},
                headers=bearer(keys.app),
            )
            async with connect(f"{chat.url}/v1/chat?token={minted.json()['token']}") as ws:
                call = json.loads(await ws.recv())["call"]
                for n in range(1, 4):
                    await ws.send(
                        json.dumps({"type": "chat.message.v1", "id": f"m-{n}", "text": "hi"})
                    )
                    while (
                        json.loads(await asyncio.wait_for(ws.recv(), 30))["type"] != "chat.reply.v1"
                    ):
                        pass
            heard.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await heard
        # the reaper's end of a quiet chat: timeout, sealed (pinecall_reaper's written rule)
        async with CallLogClient(log.url.replace("ws://", "http://"), keys.service) as reaper:
            await reaper.end(call, "timeout")
            await reaper.seal(call)
        async with CallLogClient(log.url.replace("ws://", "http://"), keys.operator) as reader:
            record = await reader.record(call)
            entries = await reader.entries(call)
    assert verify(record, entries) is None
    assert (record.channel, record.outcome, record.written) == ("chat", "timeout", 6)
    kinds: list[Any] = [e.kind for e in entries.entries]
    assert kinds.count("tool.call") == kinds.count("tool.result") == len(asked) == 2
    assert [e.data.get("message") for e in entries.entries if e.kind == "turn.user"] == [
        "m-1",
        "m-2",
        "m-3",
    ]
