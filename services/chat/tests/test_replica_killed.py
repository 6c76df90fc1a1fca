"""Acceptance 2 of issue 17 with real processes: two chat replicas and a call-log as processes,
the model the load lab's Anthropic fake on its own wire (asking the agent's tool on every other
turn), an app holding the agent over the app socket and answering its tools. The replica serving
a chat is SIGKILLed mid-reply; the page's next dial with ``?call=`` to the other continues the
same call, the app hears ``call.attached`` again, and the log holds each message and each reply
once, in order (read back), each tool call once."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import httpx
from websockets.asyncio.client import connect

from pinecall_loadlab.vendors.config import AnthropicConfig, VendorsConfig
from pinecall_loadlab.vendors.server import VendorFakes
from pinecall_testkit.appsocket import App, app
from pinecall_testkit.call_log import Keys, Process, bearer, replica_env, served

from .test_chat import Page

SECRET = "the chat replicas' secret"
TOOL = {
    "name": "book_table",
    "description": "Book a table",
    "parameters": {
        "type": "object",
        "properties": {"day": {"type": "string", "examples": ["monday"]}},
        "required": ["day"],
    },
    "timeout_s": 10,
}
AGENT = {"name": "page-bot", "prompt": "You chat on a web page. Be brief.", "tools": [TOOL]}


@contextlib.asynccontextmanager
async def dial(replica: Process, token: str, call: str | None = None) -> AsyncIterator[Page]:
    url = replica.url.replace("http://", "ws://") + f"/v1/chat?token={token}"
    async with connect(url + (f"&call={call}" if call else "")) as ws:
        yield Page(ws)


async def answering(one: App, frames: list[dict[str, Any]]) -> None:
    """The app: answers every tool call it is sent, keeps every frame it hears."""
    while True:
        try:
            frame = await one.next()
        except TimeoutError:
            continue
        frames.append(frame)
        if frame["type"] == "tool.call.v1":
            day = frame["arguments"].get("day")
            await one.send(
                "tool.result.v1", call=frame["call"], id=frame["id"], result=f"{day}: 8 pm"
            )


async def test_a_chat_goes_on_across_a_sigkill_of_its_replica_mid_reply(
    keys: Keys, database_url: str, nats_url: str, nats_namespace: str
) -> None:
    env = replica_env(database_url, nats_url, nats_namespace)
    model = VendorsConfig(
        port=0, anthropic=AnthropicConfig(first_s=0.2, chunk_s=0.1, tool_share=0.5)
    )
    async with (
        served(env, count=1) as [log],
        VendorFakes(model) as fakes,
        httpx.AsyncClient(timeout=30) as http,
    ):
        put = await http.put(
            f"{log.url}/v1/agents/page-bot",
            json=AGENT,
            params={"org": "org_acme"},
            headers=bearer(keys.app),
        )
        assert put.status_code == 200, put.text
        chat_env = {k: v for k, v in env.items() if k != "PINECALL_LOG_TOKEN_SECRET"} | {
            "PINECALL_CALL_LOG_URL": log.url,
            "PINECALL_FLEET_KEYS": f"production={keys.production},sandbox={keys.sandbox}",
            "PINECALL_CHAT_TOKEN_SECRET": SECRET,
            "PINECALL_ANTHROPIC_URL": fakes.anthropic_url,
            "ANTHROPIC_API_KEY": "lab",
        }
        frames: list[dict[str, Any]] = []
        async with (
            served(chat_env, count=2, service="chat") as (a, b),
            app(log, keys) as one,
        ):
            await one.register("page-bot")
            heard = asyncio.create_task(answering(one, frames))

            async def token(at: Process, **body: Any) -> str:
                minted = await http.post(
                    f"{at.url}/v1/chat/tokens",
                    json={"agent": "page-bot", "org": "org_acme"} | body,
                    headers=bearer(keys.app),
                )
                assert minted.status_code == 200, minted.text
                found: str = minted.json()["token"]
                return found

            async with dial(a, await token(a)) as page:
                call = (await page.expect("chat.ready.v1"))["call"]
                await page.say("m-1", "a table for two, please")
                _, first = await page.reply()  # the fake asked the tool on this first turn
                assert "monday: 8 pm" in first["text"], first
                await page.say("m-2", "and is there parking")
                await page.expect("chat.delta.v1")  # the reply has begun: a dies inside it
                a.kill()
                await a.proc.wait()
            async with dial(b, await token(b, call=call), call) as page:
                ready = await page.expect("chat.ready.v1")
                assert (ready["call"], ready["resumed"]) == (call, True)
                said = [(t["role"], t["message"]) for t in ready["history"]]
                assert said == [("user", "m-1"), ("assistant", "m-1"), ("user", "m-2")]
                await page.say("m-2", "and is there parking")  # sent again, with its id
                _, second = await page.reply()
                assert second["replayed"] is False
                await page.say("m-1", "a table for two, please")  # an old one, sent again
                _, replayed = await page.reply()
                assert (replayed["replayed"], replayed["text"]) == (True, first["text"])
            heard.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await heard
        entries = (
            await http.get(f"{log.url}/v1/calls/{call}/entries", headers=bearer(keys.operator))
        ).json()["entries"]
    attached = [f for f in frames if f["type"] == "call.attached.v1"]
    assert [(f["call"], f.get("again", False)) for f in attached] == [(call, False), (call, True)]
    kinds = [e["kind"] for e in entries]
    seqs = [e["seq"] for e in entries]
    assert seqs == list(range(1, len(seqs) + 1))
    messages = [e["data"]["message"] for e in entries if e["kind"] == "turn.user"]
    replies = [e["data"]["reply_to"] for e in entries if e["kind"] == "turn.agent"]
    assert messages == replies == ["m-1", "m-2"]  # none lost, none answered twice, in order
    asked = [e["data"]["id"] for e in entries if e["kind"] == "tool.call"]
    results = [e["data"]["id"] for e in entries if e["kind"] == "tool.result"]
    assert len(asked) == len(set(asked)) == len(results) >= 1
    sent = Counter(f["id"] for f in frames if f["type"] == "tool.call.v1")
    assert set(sent) == set(asked)
    assert set(sent.values()) == {1}  # each run once by the app
    assert kinds[0] == "call.started"
    assert json.loads(json.dumps(entries[0]["data"]))["channel"] == "chat"
