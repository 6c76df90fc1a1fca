"""The WhatsApp Cloud API fake on Meta's wire: signed webhooks retried until delivered, twice and
out of order on command, replayed; the messages endpoint's success and error shapes."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import msgspec
import pytest
from aiohttp import web

from pinecall_loadlab.whatsapp import PAIR_RATE, RE_ENGAGEMENT, WhatsAppConfig, WhatsAppFake
from pinecall_loadlab.whatsapp.testing import *  # noqa: F403

SECRET = WhatsAppConfig().app_secret


@dataclass
class Receiver:
    """The app's callback URL: records each POST's raw body and signature; refuses the first
    `refuse` with 503; answers none until `together` POSTs are open at once (0: each at once)."""

    refuse: int = 0
    together: int = 0
    posts: list[tuple[bytes, str]] = field(default_factory=list)
    url: str = ""
    _open: asyncio.Event = field(default_factory=asyncio.Event)

    async def handle(self, request: web.Request) -> web.Response:
        self.posts.append((await request.read(), request.headers["X-Hub-Signature-256"]))
        if self.together:
            if len(self.posts) >= self.together:
                self._open.set()
            await self._open.wait()
        if self.refuse > 0:
            self.refuse -= 1
            return web.Response(status=503)
        return web.Response(text="ok")

    def payloads(self) -> list[dict[str, Any]]:
        return [json.loads(body) for body, _ in self.posts]


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    rec = Receiver()
    app = web.Application()
    app.router.add_post("/hook", rec.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    rec.url = f"http://127.0.0.1:{runner.addresses[0][1]}/hook"
    yield rec
    await runner.cleanup()


@pytest.fixture
async def wa(whatsapp_fake: WhatsAppFake, receiver: Receiver) -> WhatsAppFake:
    whatsapp_fake.set_webhook_url(receiver.url)
    return whatsapp_fake


def _value(payload: dict[str, Any]) -> dict[str, Any]:
    value: dict[str, Any] = payload["entry"][0]["changes"][0]["value"]
    return value


async def _send(
    wa: WhatsAppFake, body: Any, token: str | None = None, version: str = "v21.0"
) -> tuple[int, dict[str, Any]]:
    headers = {"Authorization": f"Bearer {token or wa.config.access_token}"}
    url = f"{wa.url}/{version}/{wa.number}/messages"
    async with aiohttp.ClientSession() as s, s.post(url, json=body, headers=headers) as resp:
        return resp.status, await resp.json()


def _text(to: str, body: str = "We do, at 8.") -> dict[str, Any]:
    return {"messaging_product": "whatsapp", "to": to, "type": "text", "text": {"body": body}}


async def test_a_contacts_message_is_signed_over_its_raw_body(
    wa: WhatsAppFake, receiver: Receiver
) -> None:
    wa.contact("34600111222", name="Ana").send("¿Mesa para dos? 🍷")
    async with asyncio.timeout(5):
        await wa.webhooks.wait_delivered(1)
    [(body, sig)] = receiver.posts
    assert sig == "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    payload = json.loads(body)
    assert payload["object"] == "whatsapp_business_account"
    value = _value(payload)
    assert value["metadata"] == {
        "display_phone_number": "15550783881",
        "phone_number_id": wa.number,
    }
    assert value["contacts"] == [{"profile": {"name": "Ana"}, "wa_id": "34600111222"}]
    [message] = value["messages"]
    assert message["from"] == "34600111222"
    assert message["id"].startswith("wamid.")
    assert message["text"] == {"body": "¿Mesa para dos? 🍷"}
    assert message["timestamp"].isdigit()


async def test_an_undelivered_webhook_is_retried_until_a_2xx(
    wa: WhatsAppFake, receiver: Receiver
) -> None:
    receiver.refuse = 2
    wa.contact("34600111222").send("hello")
    async with asyncio.timeout(5):
        await wa.webhooks.wait_delivered(1)
    assert [a.status for a in wa.webhooks.attempts] == [503, 503, 200]
    assert len({body for body, _ in receiver.posts}) == 1  # the same bytes each time


async def test_webhooks_twice_out_of_order_and_replayed(
    wa: WhatsAppFake, receiver: Receiver
) -> None:
    ana = wa.contact("34600111222")
    wa.webhooks.faults.reorder_next = 1
    wa.webhooks.faults.duplicate_next = 1
    first, second = ana.send("one"), ana.send("two")
    wa.webhooks.replay(first.id)
    async with asyncio.timeout(5):
        await wa.webhooks.wait_delivered(4)
    said = [_value(p)["messages"][0]["text"]["body"] for p in receiver.payloads()]
    assert said == ["two", "two", "one", "one"]
    assert receiver.posts[0][0] == second.body
    assert receiver.posts[3][0] == first.body


async def test_the_messages_endpoint_answers_and_sends_statuses_out_of_order(
    wa: WhatsAppFake, receiver: Receiver
) -> None:
    ana = wa.contact("34600111222")
    ana.send("hello")
    wa.status_order = "reversed"
    status, body = await _send(wa, _text("34600111222"))
    assert status == 200
    [message] = body["messages"]
    assert body["messaging_product"] == "whatsapp"
    assert body["contacts"] == [{"input": "34600111222", "wa_id": "34600111222"}]
    async with asyncio.timeout(5):
        await wa.webhooks.wait_delivered(4)
        [sent] = await ana.wait_received(1)
    assert sent.id == message["id"]
    assert sent.text == "We do, at 8."
    statuses = [_value(p)["statuses"][0] for p in receiver.payloads()[1:]]
    assert [s["status"] for s in statuses] == ["read", "delivered", "sent"]
    assert {s["id"] for s in statuses} == {message["id"]}
    assert {s["recipient_id"] for s in statuses} == {"34600111222"}


async def test_a_failed_status_carries_its_error(wa: WhatsAppFake, receiver: Receiver) -> None:
    wa.contact("34600111222").send("hello")
    wa.fail_next = 1
    assert (await _send(wa, _text("34600111222")))[0] == 200
    async with asyncio.timeout(5):
        await wa.webhooks.wait_delivered(2)
    [status] = _value(receiver.payloads()[1])["statuses"]
    assert status["status"] == "failed"
    assert status["errors"][0]["code"] == 131000


async def test_free_text_outside_the_window_is_refused_131047(wa: WhatsAppFake) -> None:
    status, body = await _send(wa, _text("34600999999"))  # never wrote
    assert (status, body["error"]["code"]) == (400, RE_ENGAGEMENT)
    wa.contact("34600111222").send("hello")
    wa.advance(wa.config.window_s + 1)
    status, body = await _send(wa, _text("34600111222"))
    assert (status, body["error"]["code"]) == (400, RE_ENGAGEMENT)
    assert body["error"]["type"] == "OAuthException"
    assert body["error"]["error_data"]["messaging_product"] == "whatsapp"
    assert "24 hours" in body["error"]["error_data"]["details"]
    assert wa.sent == []


async def test_a_second_send_to_one_contact_too_soon_is_refused_131056(wa: WhatsAppFake) -> None:
    wa.config = msgspec.structs.replace(wa.config, pair_interval_s=3600.0)
    wa.contact("34600111222").send("hello")
    assert (await _send(wa, _text("34600111222")))[0] == 200
    status, body = await _send(wa, _text("34600111222", "and another"))
    assert (status, body["error"]["code"]) == (400, PAIR_RATE)
    assert wa.refused == [("34600111222", PAIR_RATE)]


@pytest.mark.parametrize(
    "body",
    [
        "not json",
        [],
        {**_text("34600111222"), "messaging_product": "sms"},
        {**_text("34600111222"), "to": "ana"},
        {**_text("34600111222"), "type": "image"},
        {**_text("34600111222"), "text": {"body": ""}},
        {**_text("34600111222"), "text": "hi"},
        _text("34600111222", "x" * 4097),
    ],
)
async def test_a_body_that_is_no_text_message_is_refused_100(wa: WhatsAppFake, body: Any) -> None:
    wa.contact("34600111222").send("hello")
    status, answer = await _send(wa, body)
    assert (status, answer["error"]["code"]) == (400, 100)
    assert wa.sent == []


async def test_a_wrong_token_is_401_and_an_unknown_number_400(wa: WhatsAppFake) -> None:
    status, body = await _send(wa, _text("34600111222"), token="forged")
    assert (status, body["error"]["code"]) == (401, 190)
    url = f"{wa.url}/v21.0/999/messages"
    headers = {"Authorization": f"Bearer {wa.config.access_token}"}
    async with aiohttp.ClientSession() as s, s.post(url, json={}, headers=headers) as resp:
        assert resp.status == 400
        assert (await resp.json())["error"]["code"] == 100


async def test_the_lab_control_sends_and_reads_over_http(
    wa: WhatsAppFake, receiver: Receiver
) -> None:
    url = f"{wa.url}/lab/whatsapp/contacts/34600111222/messages"
    async with aiohttp.ClientSession() as s:
        async with s.post(url, json={"text": "hi", "name": "Ana"}) as resp:
            assert resp.status == 200
            sent_id = (await resp.json())["id"]
        async with s.post(url, json={"text": ""}) as resp:
            assert resp.status == 400
        async with asyncio.timeout(5):
            await wa.webhooks.wait_delivered(1)
        assert _value(receiver.payloads()[0])["messages"][0]["id"] == sent_id
        assert (await _send(wa, _text("34600111222")))[0] == 200
        async with s.get(url) as resp:
            [got] = (await resp.json())["received"]
    assert got["text"] == "We do, at 8."


def test_the_command_says_its_default_port_and_refuses_a_bad_config(tmp_path: Any) -> None:
    from click.testing import CliRunner

    from pinecall_loadlab.commands import lab
    from pinecall_loadlab.whatsapp.config import DEFAULT_PORT

    runner = CliRunner()
    shown = runner.invoke(lab, ["whatsapp", "--help"])
    assert shown.exit_code == 0
    assert f"else {DEFAULT_PORT}" in shown.output
    bad = tmp_path / "wa.json"
    bad.write_text('{"app_secret": "", "unknown": 1}')
    refused = runner.invoke(lab, ["whatsapp", "--config", str(bad)])
    assert refused.exit_code == 2
    assert "--config" in refused.output


async def test_in_flight_webhooks_are_posted_at_once_and_each_attempt_is_timed(
    receiver: Receiver,
) -> None:
    """``in_flight: 3``: three POSTs are open together (the receiver answers none until the third
    arrives); each attempt says when it began, how long it queued and how long its answer took."""
    receiver.together = 3
    config = WhatsAppConfig(port=0, retry_min_s=0.02, pair_interval_s=0.0, in_flight=3)
    async with WhatsAppFake(config) as wa:
        wa.set_webhook_url(receiver.url)
        for n in range(3):
            wa.contact(f"3460011122{n}").send("hello")
        async with asyncio.timeout(5):
            await wa.webhooks.wait_delivered(3)
    assert sorted(wa.webhooks.delivered) == [1, 2, 3]
    for attempt in wa.webhooks.attempts:
        assert attempt.status == 200
        assert attempt.at > 0
        assert attempt.queued_s >= 0
        assert attempt.took_s > 0
