"""The web chat (issue 17, acceptance 1, 2 and 7): a chat runs its agent's prompt and tools, its
log holds every message once, in order; a cut ends the session, never the call, and a message
sent again is answered once; bad input closes with a documented code and writes nothing."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from pinecall_chat import tokens
from pinecall_contracts.chat import ChatClose
from pinecall_testkit.appsocket import app as app_socket
from pinecall_testkit.call_log import Keys, Listening, bearer

Chat = Callable[..., AbstractAsyncContextManager[Listening]]
WAIT_S = 10.0
SECRET = "a chat secret of the test"  # conftest's


class Page:
    """A page's chat socket."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws

    async def next(self) -> dict[str, Any]:
        frame: dict[str, Any] = json.loads(await asyncio.wait_for(self.ws.recv(), WAIT_S))
        return frame

    async def expect(self, kind: str) -> dict[str, Any]:
        frame = await self.next()
        assert frame["type"] == kind, frame
        return frame

    async def say(self, message: str, text: str) -> None:
        await self.ws.send(json.dumps({"type": "chat.message.v1", "id": message, "text": text}))

    async def reply(self) -> tuple[list[str], dict[str, Any]]:
        """The deltas, then the whole reply."""
        deltas = []
        while (frame := await self.next())["type"] == "chat.delta.v1":
            deltas.append(frame["text"])
        assert frame["type"] == "chat.reply.v1", frame
        return deltas, frame

    async def closed_with(self) -> int:
        return (await self.close_frame())[0]

    async def close_frame(self) -> tuple[int, str]:
        """The code and reason the server closed with (frames before it skipped)."""
        try:
            while True:
                await asyncio.wait_for(self.ws.recv(), WAIT_S)
        except ConnectionClosed as closed:
            rcvd = closed.rcvd
        assert rcvd is not None, "no close frame"
        return rcvd.code, rcvd.reason


async def token(chat: Listening, keys: Keys, key: str | None = None, **body: Any) -> str:
    answer = await chat.client.post(
        "/v1/chat/tokens",
        json={"agent": "support-bot", "org": "org_acme", "visitor": "v-1"} | body,
        headers=bearer(key or keys.app),
    )
    assert answer.status_code == 200, answer.text
    minted: str = answer.json()["token"]
    return minted


@asynccontextmanager
async def page(chat: Listening, tok: str, call: str | None = None) -> AsyncIterator[Page]:
    url = f"{chat.url}/v1/chat?token={tok}" + (f"&call={call}" if call else "")
    async with connect(url) as ws:
        yield Page(ws)


async def entries(call_log: Listening, keys: Keys, call: str) -> list[dict[str, Any]]:
    answer = await call_log.client.get(f"/v1/calls/{call}/entries", headers=bearer(keys.production))
    assert answer.status_code == 200, answer.text
    found: list[dict[str, Any]] = answer.json()["entries"]
    return found


async def test_a_chat_runs_its_agent_with_tools_and_survives_a_cut_to_another_replica(
    call_log: Listening, chat: Chat, keys: Keys, model: Any
) -> None:
    async with app_socket(call_log, keys) as app, chat() as one, chat() as two:
        await app.register()
        tok = await token(one, keys)
        async with page(one, tok) as p:
            ready = await p.expect("chat.ready.v1")
            call = ready["call"]
            assert (ready["resumed"], ready["history"]) == (False, [])
            attached = await app.expect("call.attached.v1")
            assert (attached["call"], attached["agent"]) == (call, "support-bot")
            await p.say("m-1", "hello")
            deltas, reply = await p.reply()
            assert (deltas, reply["text"], reply["replayed"]) == (
                ["You ", "said: ", "hello"],
                "You said: hello",
                False,
            )
            # a tool, through call-log's tool path: the app hears it once and answers
            await p.say("m-2", "book me in")
            asked = await app.expect("tool.call.v1")
            assert (asked["name"], asked["arguments"]) == ("book_slot", {"day": "monday"})
            await app.send("tool.result.v1", call=call, id=asked["id"], result="seat 4")
            assert (await app.expect("tool.result.ack.v1"))["duplicate"] is False
            _, reply = await p.reply()
            assert reply["text"] == "Done: seat 4"
            # the page is cut mid-reply: nothing of that reply is written
            model.gate = asyncio.Event()
            await p.say("m-3", "are you there")
            assert (await p.expect("chat.delta.v1"))["text"] == "You "
        model.gate.set()
        # the page dials the other replica, naming its call: rebuilt from the log
        resume = await token(two, keys, call=call)
        async with page(two, resume, call) as p:
            ready = await p.expect("chat.ready.v1")
            assert ready["resumed"] is True
            # the app holding the agent hears the call attached again (call-log's served)
            again = await app.expect("call.attached.v1")
            assert (again["call"], again["again"], again["claimed"]) == (call, True, True)
            assert [(t["role"], t["message"]) for t in ready["history"]] == [
                ("user", "m-1"),
                ("assistant", "m-1"),
                ("user", "m-2"),
                ("assistant", "m-2"),
                ("user", "m-3"),
            ]
            # m-2 sent again: recognised, its reply as written, nothing written
            before = await entries(call_log, keys, call)
            await p.say("m-2", "book me in")
            deltas, reply = await p.reply()
            assert (deltas, reply["text"], reply["replayed"]) == ([], "Done: seat 4", True)
            assert await entries(call_log, keys, call) == before
            # m-3, cut before its reply was written: answered now, its message not written again
            await p.say("m-3", "are you there")
            _, reply = await p.reply()
            assert reply["text"] == "You said: are you there"
    log = await entries(call_log, keys, call)
    turns = [
        (e["kind"], e["data"].get("message") or e["data"].get("reply_to") or e["data"].get("id"))
        for e in log
        if e["kind"] != "call.started"
    ]
    assert turns == [
        ("turn.user", "m-1"),
        ("turn.agent", "m-1"),
        ("turn.user", "m-2"),
        ("tool.call", "tc_1"),
        ("tool.result", "tc_1"),
        ("turn.agent", "m-2"),
        ("turn.user", "m-3"),
        ("turn.agent", "m-3"),
    ]
    assert log[0]["kind"] == "call.started"
    assert log[0]["data"]["channel"] == "chat"
    assert model.asked == 1
    record = (
        await call_log.client.get(f"/v1/calls/{call}", headers=bearer(keys.production))
    ).json()
    assert (record["channel"], record["state"], record["written"]) == ("chat", "open", 6)


async def writer_entries(call_log: Listening, keys: Keys, call: str) -> list[str]:
    return [e["kind"] for e in await entries(call_log, keys, call) if e["kind"] != "call.started"]


async def test_bad_frames_close_with_their_code_and_write_nothing(
    call_log: Listening, chat: Chat, keys: Keys
) -> None:
    async with chat() as one:
        tok = await token(one, keys)
        cases: list[tuple[Any, ChatClose]] = [
            ("not json", ChatClose.MALFORMED),
            (json.dumps({"type": "chat.hello.v1"}), ChatClose.MALFORMED),
            (
                json.dumps({"type": "chat.message.v1", "id": "bad id!", "text": "x"}),
                ChatClose.MALFORMED,
            ),
            (json.dumps({"type": "chat.message.v1", "id": "m-1", "text": ""}), ChatClose.MALFORMED),
            (b"binary", ChatClose.MALFORMED),
            (
                json.dumps({"type": "chat.message.v1", "id": "m-1", "text": "x" * 101}),
                ChatClose.TOO_LONG,
            ),
            (
                json.dumps({"type": "chat.message.v1", "id": "m-1", "text": "x" * 2000}),
                ChatClose.TOO_BIG,
            ),
        ]
        for frame, code in cases:
            async with page(one, tok) as p:
                call = (await p.expect("chat.ready.v1"))["call"]
                await p.ws.send(frame)
                assert await p.closed_with() == code, frame
            assert await writer_entries(call_log, keys, call) == []


async def test_a_dial_out_of_scope_closes_with_its_code_and_writes_nothing(
    call_log: Listening, chat: Chat, keys: Keys
) -> None:
    async with chat() as one:
        async with page(one, await token(one, keys)) as p:
            call = (await p.expect("chat.ready.v1"))["call"]
        before = await entries(call_log, keys, call)
        exp = tokens.expiry(60)
        claims = {
            "agent": "support-bot",
            "org": "org_acme",
            "environment": "production",
            "exp": exp,
        }
        forged = tokens.mint("another secret", tokens.Claims(**claims))
        expired = tokens.mint(SECRET, tokens.Claims(**(claims | {"exp": exp - 3600})))

        def signed(**changes: Any) -> str:  # refused at the mint: signed here, as a leak would
            return tokens.mint(SECRET, tokens.Claims(**(claims | changes)))

        other_org = signed(org="org_other", call=call)
        sandbox = signed(environment="sandbox", call=call)
        other_agent = signed(agent="sales-bot", call=call)
        other_call = signed(call="call_elsewhere")
        for tok, dialled, code in (
            (None, call, ChatClose.BAD_TOKEN),
            (forged, call, ChatClose.BAD_TOKEN),
            (expired, call, ChatClose.BAD_TOKEN),
            (other_org, call, ChatClose.OUT_OF_SCOPE),
            (sandbox, call, ChatClose.OUT_OF_SCOPE),
            (other_agent, call, ChatClose.OUT_OF_SCOPE),
            (other_call, call, ChatClose.OUT_OF_SCOPE),
            (signed(call="call_nobody"), "call_nobody", ChatClose.NO_CALL),
            (await token(one, keys, call=call), None, ChatClose.OUT_OF_SCOPE),
        ):
            async with page(one, tok or "", dialled) as p:
                assert await p.closed_with() == code, (tok, dialled)
        assert await entries(call_log, keys, call) == before
        # an ended call is not taken up
        ended = await call_log.client.post(
            f"/v1/calls/{call}/end", json={"outcome": "completed"}, headers=bearer(keys.production)
        )
        assert ended.status_code == 200
        async with page(one, signed(call=call), call) as p:
            assert await p.closed_with() == ChatClose.NOT_OPEN


async def test_a_dial_whose_call_is_no_call_id_closes_4400_saying_so(
    call_log: Listening, chat: Chat, keys: Keys
) -> None:
    """A ``?call=`` that is no call id is a malformed dial (4400) with a reason for the page:
    not 1011, and no internal URL in it."""
    async with chat() as one, page(one, await token(one, keys), "bogus!!") as p:
        code, reason = await p.close_frame()
    assert code == ChatClose.MALFORMED
    assert reason == "?call= is not a call id (like call_7Qm2x)"
    assert call_log.url.replace("ws://", "") not in reason


async def test_a_token_says_whether_it_is_missing_malformed_or_not_ours(
    call_log: Listening, chat: Chat, keys: Keys
) -> None:
    forged = tokens.mint(
        "another secret",
        tokens.Claims(agent="support-bot", org="org_acme", environment="production", exp=2**40),
    )
    async with chat() as one:
        for tok, said in (
            ("", "no chat token"),
            ("garbage", "a malformed chat token"),
            ("gar.bage", "an invalid chat token"),
            (forged, "an invalid chat token"),
        ):
            async with page(one, tok) as p:
                code, reason = await p.close_frame()
            assert code == ChatClose.BAD_TOKEN
            assert reason.startswith(said), reason


async def test_a_token_is_minted_only_for_what_a_dial_could_take(
    call_log: Listening, chat: Chat, keys: Keys
) -> None:
    """Another org (one that does not define the agent), an agent the org does not define, a
    call that does not exist, another org's or environment's call, an ended one: each a
    problem detail at the mint, not a token that fails when the page dials."""
    async with chat() as one:
        async with page(one, await token(one, keys)) as p:
            call = (await p.expect("chat.ready.v1"))["call"]
        base = {"agent": "support-bot", "org": "org_acme", "visitor": "v-1"}
        for key, body, status in (
            (keys.app, {"org": "org_other"}, 403),
            (keys.app, {"agent": "sales-bot"}, 403),
            (keys.app, {"call": "call_nobody"}, 404),
            (keys.app, {"org": "org_other", "call": call}, 403),
            (keys.app_sandbox, {"call": call}, 403),
        ):
            answer = await one.client.post("/v1/chat/tokens", json=base | body, headers=bearer(key))
            assert answer.status_code == status, (body, answer.text)
            assert answer.headers["content-type"] == "application/problem+json"
        ended = await call_log.client.post(
            f"/v1/calls/{call}/end", json={"outcome": "completed"}, headers=bearer(keys.production)
        )
        assert ended.status_code == 200
        answer = await one.client.post(
            "/v1/chat/tokens", json=base | {"call": call}, headers=bearer(keys.app)
        )
        assert answer.status_code == 409, answer.text


async def test_a_token_needs_an_app_key_and_a_good_body(chat: Chat, keys: Keys) -> None:
    async with chat() as one:
        for key, body, status in (
            (None, {"agent": "support-bot", "org": "org_acme"}, 401),
            (keys.production, {"agent": "support-bot", "org": "org_acme"}, 403),
            (keys.app, {"agent": "Bad Agent", "org": "org_acme"}, 400),
            (keys.app, {"org": "org_acme"}, 400),
        ):
            answer = await one.client.post(
                "/v1/chat/tokens", json=body, headers=bearer(key) if key else {}
            )
            assert answer.status_code == status, answer.text
            assert answer.headers["content-type"] == "application/problem+json"
