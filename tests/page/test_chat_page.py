"""A chat in a real browser (``examples/page``, ``WS /v1/chat``) survives the chat replica
serving it SIGKILLed mid-reply (issue 17, acceptances 2 and 6).

Two chat replicas as processes behind a relay (a load balancer), call-log as a process, the
model the load lab's Anthropic fake on its own wire (slow to start a reply, so the kill lands
inside one). The page dials again with ``?call=`` to the other replica, its history comes back
from the log, and the message being answered is sent again with its id: each message is written
and answered once.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlencode

import httpx
import pytest
from playwright.async_api import Page

from pinecall_loadlab.vendors.config import AnthropicConfig, VendorsConfig
from pinecall_loadlab.vendors.server import VendorFakes
from pinecall_testkit.call_log import Keys, bearer, replica_env, served
from pinecall_testkit.relay import Relay

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

SECRET = "the page tests' chat secret"
AGENT = {"name": "page-bot", "prompt": "You chat on a web page. Be brief."}


async def test_a_chat_survives_a_chat_replica_sigkill_mid_reply(
    page: Page,
    page_url: str,
    keys: Keys,
    module_database_url: str,
    nats_url: str,
    module_nats_namespace: str,
    artifacts: Path,
) -> None:
    env = replica_env(module_database_url, nats_url, module_nats_namespace)
    slow = VendorsConfig(port=0, anthropic=AnthropicConfig(first_s=0.3, chunk_s=0.3))
    async with (
        served(env, count=1) as [log],
        VendorFakes(slow) as fakes,
        httpx.AsyncClient(timeout=30) as http,
    ):
        put = await http.put(
            f"{log.url}/v1/agents/page-bot",
            json=AGENT,
            params={"org": "org_acme"},
            headers=bearer(keys.app),
        )
        assert put.status_code == 200, put.text
        chat_env = env | {
            "PINECALL_CALL_LOG_URL": log.url,
            "PINECALL_FLEET_KEYS": f"production={keys.production},sandbox={keys.sandbox}",
            "PINECALL_CHAT_TOKEN_SECRET": SECRET,
            "PINECALL_ANTHROPIC_URL": fakes.anthropic_url,
            "ANTHROPIC_API_KEY": "lab",
        }
        chat_env.pop("PINECALL_LOG_TOKEN_SECRET")
        async with (
            served(chat_env, count=2, service="chat") as (a, b),
            Relay.before(a.url) as balancer,
        ):
            minted = await http.post(
                f"{a.url}/v1/chat/tokens",
                json={"agent": "page-bot", "org": "org_acme"},
                headers=bearer(keys.app),
            )
            assert minted.status_code == 200, minted.text
            address = {"chat": balancer.http_url, "chat_token": minted.json()["token"]}
            await page.goto(f"{page_url}?{urlencode(address)}")
            await page.wait_for_function("window.pinecall.states.includes('chat ready')")

            await page.fill("#chat-text", "hello there")
            await page.press("#chat-text", "Enter")
            await page.wait_for_function("window.pinecall.chat.length === 1", timeout=30_000)
            await page.fill("#chat-text", "and a second thing")
            await page.press("#chat-text", "Enter")
            # the reply has begun (its first piece shown): a dies inside it
            await page.wait_for_function(
                "document.querySelectorAll('#chat-turns li.agent')[1]?.textContent.length > 0",
                timeout=30_000,
            )
            balancer.point(b.url)
            a.kill()
            await a.proc.wait()
            await page.wait_for_function("window.pinecall.chat.length === 2", timeout=30_000)
            await page.screenshot(path=artifacts / "chat-across-a-kill.png", full_page=True)

            states = await page.evaluate("window.pinecall.states")
            assert "chat dialling again" in states
            roles = await page.eval_on_selector_all(
                "#chat-turns li", "els => els.map(e => e.className)"
            )
            assert roles == ["user", "agent", "user", "agent"]
            call = await page.evaluate("document.querySelector('#chat-turns li').dataset.message")
            assert call
            records = await http.get(
                f"{log.url}/v1/calls", params={"state": "open"}, headers=bearer(keys.operator)
            )
            [written] = [c["call"] for c in records.json()["calls"]]
            entries = (
                await http.get(
                    f"{log.url}/v1/calls/{written}/entries", headers=bearer(keys.operator)
                )
            ).json()["entries"]
            said = [e["data"]["message"] for e in entries if e["kind"] == "turn.user"]
            answered = [e["data"]["reply_to"] for e in entries if e["kind"] == "turn.agent"]
            assert len(said) == len(set(said)) == 2  # each message written once
            assert answered == said  # and answered once, in order
