"""The WhatsApp webhook (issue 17, acceptance 3 and 7): the handshake answers only a number's
verify token; a forged signature is 401 and a bad notification refused, writing nothing; a
notification JetStream does not store is a 503 (Meta delivers it again). The fake, the number
and the replica: conftest.py."""

from __future__ import annotations

import asyncio
from typing import Any

from pinecall_loadlab.whatsapp import WhatsAppConfig, WhatsAppFake, signature
from pinecall_testkit.call_log import Keys, Listening

from .conftest import (
    VERIFY,
    WAIT_S,
    agent_log,
    hook_url,
    open_calls,
    whatsapp_of,
)


async def test_the_handshake_answers_only_a_numbers_verify_token(number: str, replica: Any) -> None:
    async with replica() as one:
        hook = "/v1/whatsapp/webhook"
        hub = {"hub.mode": "subscribe", "hub.verify_token": VERIFY, "hub.challenge": "1158201444"}
        ok = await one.client.get(hook, params=hub)
        assert (ok.status_code, ok.text) == (200, "1158201444")
        for wrong in ({"hub.verify_token": "forged-token"}, {"hub.mode": "unsubscribe"},
                      {"hub.challenge": None}):  # fmt: skip
            params = {k: v for k, v in (hub | wrong).items() if v is not None}
            refused = await one.client.get(hook, params=params)
            assert refused.status_code == 403
            assert refused.headers["content-type"] == "application/problem+json"


async def test_a_forged_or_bad_webhook_is_refused_and_writes_nothing(
    call_log: Listening, keys: Keys, fake: WhatsAppFake, number: str, replica: Any
) -> None:
    async with replica() as one:
        wa = whatsapp_of(one)
        # Meta's wire, signed with another app's secret: the fake retries, every time refused
        forger = WhatsAppFake(WhatsAppConfig(port=0, app_secret="not-the-app-secret",
                                             retry_min_s=0.01, retry_for_s=2.0))  # fmt: skip
        async with forger:
            forger.set_webhook_url(hook_url(one))
            delivery = forger.contact("34600111222").send("forged")
            async with asyncio.timeout(WAIT_S):
                await forger.webhooks.wait_attempts(2)
            assert {a.status for a in forger.webhooks.attempts} == {401}
        body, hook = delivery.body, "/v1/whatsapp/webhook"
        good = signature(fake.config.app_secret, body)
        cases = [
            (body, {}, 401),  # no signature
            (body, {"X-Hub-Signature-256": "sha256=" + "0" * 64}, 401),
            (body, {"X-Hub-Signature-256": good.removeprefix("sha256=")}, 401),
            (body + b" ", {"X-Hub-Signature-256": good}, 401),  # not the raw body signed
            (b"not json", {"X-Hub-Signature-256": good}, 400),
            (b'{"object": "page", "entry": []}', {}, 400),
            (b'{"object": "whatsapp_business_account", "entry": []}', {}, 400),
            (body.replace(number.encode(), b"999"), {}, 404),  # a number nobody put
            (b" " * (3 * 1024 * 1024 + 1), {}, 413),
        ]
        for sent, headers, status in cases:
            refused = await one.client.post(hook, content=sent, headers=headers)
            assert (refused.status_code, refused.headers["content-type"]) == (
                status, "application/problem+json",
            ), (sent[:60], refused.text)  # fmt: skip
        await wa.threads.settled()
        assert await agent_log(call_log, keys) == []
        assert await open_calls(call_log, keys) == []
        assert fake.contacts.get("34600111222") is None or not fake.contacts["34600111222"].received


async def test_the_webhook_is_503_when_jetstream_does_not_store_it(
    call_log: Listening, keys: Keys, fake: WhatsAppFake, number: str, replica: Any
) -> None:
    """JetStream not storing (its stream gone): the webhook cannot make what it acknowledges
    durable, so it does not
    acknowledge it (503, a problem detail; Meta delivers again), and nothing is written."""
    from pinecall_servicekit.platform import free_port

    async with replica() as one:
        wa = whatsapp_of(one)
        fake.set_webhook_url(f"http://127.0.0.1:{free_port()}/v1/whatsapp/webhook")  # nobody
        body = fake.contact("34600111222").send("one").body
        bus = wa.inbox.bus
        await bus.js.delete_stream(bus.subjects.whatsapp_stream)
        hook, signed = "/v1/whatsapp/webhook", signature(fake.config.app_secret, body)
        refused = await one.client.post(hook, content=body, headers={"X-Hub-Signature-256": signed})
        assert (refused.status_code, refused.headers["content-type"]) == (
            503, "application/problem+json",
        ), refused.text  # fmt: skip
    assert await agent_log(call_log, keys) == []
    assert await open_calls(call_log, keys) == []
