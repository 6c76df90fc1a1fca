"""Two sessions of one call at once (issue 17: a page that dialled twice): the first to write
wins; the other's write is refused by the log's count, and its socket is closed 4410 with nothing
of it written; dialled again, it takes the call up with what the other wrote. Nothing doubled."""

from __future__ import annotations

from pinecall_contracts.chat import ChatClose
from pinecall_testkit.call_log import Keys, Listening

from .test_chat import Chat, entries, page, token


async def test_two_sessions_of_one_call_one_wins_the_other_is_closed_4410(
    call_log: Listening, chat: Chat, keys: Keys
) -> None:
    async with chat() as one, chat() as two, page(one, await token(one, keys)) as a:
        call = (await a.expect("chat.ready.v1"))["call"]
        await a.say("m-1", "hello")
        await a.reply()
        # the page dials the call again on the other replica, the first socket still open
        async with page(two, await token(two, keys, call=call), call) as b:
            assert len((await b.expect("chat.ready.v1"))["history"]) == 2
            await a.say("m-2", "first")
            _, reply = await a.reply()
            assert reply["text"] == "You said: first"
            # b's view is stale: its message is refused on the log's count, nothing written
            before = await entries(call_log, keys, call)
            await b.say("m-3", "second")
            assert await b.closed_with() == ChatClose.SUPERSEDED
            assert await entries(call_log, keys, call) == before
        # dialled again, it has what a wrote, and m-3 is answered once
        async with page(two, await token(two, keys, call=call), call) as b:
            history = (await b.expect("chat.ready.v1"))["history"]
            assert [t["message"] for t in history] == ["m-1", "m-1", "m-2", "m-2"]
            await b.say("m-3", "second")
            _, reply = await b.reply()
            assert reply["text"] == "You said: second"
        # now a is the stale one
        await a.say("m-4", "third")
        assert await a.closed_with() == ChatClose.SUPERSEDED
    turns = [
        (e["kind"], e["data"].get("message") or e["data"].get("reply_to"))
        for e in await entries(call_log, keys, call)
        if e["kind"] != "call.started"
    ]
    assert turns == [
        ("turn.user", "m-1"),
        ("turn.agent", "m-1"),
        ("turn.user", "m-2"),
        ("turn.agent", "m-2"),
        ("turn.user", "m-3"),
        ("turn.agent", "m-3"),
    ]
