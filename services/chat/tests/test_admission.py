"""A written call is admitted before it opens (issue 17, "The web chat": "admission included,
the same quota and one line as voice"): the dispatcher holds the org's ``concurrent_calls`` and
knows which agents exist; a dial refused closes with its code (4429, 4422, 4503) and opens
nothing. A dial that names its call (``?call=``) takes up a call already counted."""

from __future__ import annotations

from typing import Any

from pinecall_chat import tokens
from pinecall_contracts.chat import ChatClose
from pinecall_testkit.call_log import Keys, Listening, bearer

from .test_chat import SECRET, Chat, page, token


async def calls(call_log: Listening, keys: Keys) -> list[str]:
    """The calls on the log (every one, open or not)."""
    answer = await call_log.client.get("/v1/calls", headers=bearer(keys.operator))
    assert answer.status_code == 200, answer.text
    return [c["call"] for c in answer.json()["calls"]]


def admitted(dispatcher: Listening, keys: Keys) -> dict[str, Any]:
    return {
        "dispatcher_url": dispatcher.url.replace("ws://", "http://"),
        "service_key": keys.service,
    }


async def test_a_chat_over_its_orgs_quota_or_for_an_unknown_agent_opens_nothing(
    call_log: Listening, dispatcher: Listening, chat: Chat, keys: Keys
) -> None:
    quota = await dispatcher.client.post(
        "/v1/ops/quotas",
        json={"org": "org_acme", "environment": "production", "concurrent_calls": 1},
        headers=bearer(keys.operator),
    )
    assert quota.status_code == 200, quota.text
    async with chat(**admitted(dispatcher, keys)) as one:
        async with page(one, await token(one, keys)) as first:
            call = (await first.expect("chat.ready.v1"))["call"]
            # the org holds its one call: a second chat is refused, and nothing is opened
            async with page(one, await token(one, keys)) as second:
                assert await second.closed_with() == ChatClose.QUOTA
            assert await calls(call_log, keys) == [call]
            # the call itself, dialled again, was counted already: taken up
            async with page(one, await token(one, keys, call=call), call) as again:
                assert (await again.expect("chat.ready.v1"))["call"] == call
        # an agent org_acme does not define (refused at the mint: a token signed here, as one
        # minted before its agent went would be)
        claims = tokens.Claims(
            agent="nobody", org="org_acme", environment="production", exp=tokens.expiry(60)
        )
        async with page(one, tokens.mint(SECRET, claims)) as p:
            assert await p.closed_with() == ChatClose.UNKNOWN_AGENT
        assert await calls(call_log, keys) == [call]
    offers = await dispatcher.client.get("/v1/ops/offers", headers=bearer(keys.operator))
    refused = {f["fleet"]: f.get("refused") for f in offers.json()["fleets"]}
    assert refused == {"written/chat": {"quota": 1, "unknown_agent": 1}}


async def test_a_chat_the_dispatcher_cannot_admit_is_4503_and_opens_nothing(
    call_log: Listening, chat: Chat, keys: Keys
) -> None:
    from pinecall_servicekit.platform import free_port

    nobody = f"http://127.0.0.1:{free_port()}"
    async with chat(dispatcher_url=nobody, service_key=keys.service) as one:
        tok = await token(one, keys)
        async with page(one, tok) as p:
            assert await p.closed_with() == ChatClose.UNAVAILABLE
    assert await calls(call_log, keys) == []
