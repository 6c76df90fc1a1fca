"""WhatsApp threads against Meta's wire (issue 17, acceptance 3, 4 and 7): the lab's Cloud API
fake delivers to a chat replica, which runs each thread as a written call on call-log.

Each message delivered twice and out of order, statuses out of order: each message written once
and answered once, in arrival order; with no app holding the agent, messages wait on its log and
are answered in order once one registers, and one whose window closed is let go. The webhook's
handshake and what it refuses: test_whatsapp_webhook.py. The fake, the number and the replica:
conftest.py."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from pinecall_chat.whatsapp_wire import thread_call
from pinecall_loadlab.whatsapp import WhatsAppFake
from pinecall_testkit.appsocket import app as app_socket
from pinecall_testkit.call_log import Keys, Listening, bearer

from .conftest import (
    WAIT_S,
    Clock,
    agent_log,
    call_entries,
    hook_url,
    open_calls,
    whatsapp_of,
)


async def test_each_message_twice_and_out_of_order_is_written_and_answered_once_in_arrival_order(
    call_log: Listening, keys: Keys, fake: WhatsAppFake, number: str, replica: Any
) -> None:
    async with app_socket(call_log, keys) as app, replica() as one:
        await app.register()
        wa = whatsapp_of(one)
        fake.set_webhook_url(hook_url(one))
        async with asyncio.timeout(WAIT_S):
            await wa.threads.until_held("production", "org_acme", "support-bot")
            # the drain of the backlog that the hold began: a message sent while it runs joins
            # the backlog (message.waiting, no why) and is taken from there
            await wa.threads.settled()
        ana = fake.contact("34600111222", name="Ana")
        fake.status_order = "reversed"
        fake.webhooks.faults.reorder_next = 1  # m1 is held back until m2 has gone
        fake.webhooks.faults.duplicate_next = 2  # m2 and m3 arrive twice
        m1, m2, m3 = ana.send("one"), ana.send("two"), ana.send("three")
        async with asyncio.timeout(WAIT_S):
            replies = await ana.wait_received(3)
            fake.webhooks.replay(m1.id)  # Meta's retry of a delivery it thought lost
            await fake.webhooks.wait_delivered(6 + 9)  # 5 messages, 1 replayed, 9 statuses
            await wa.threads.settled()
        assert [r.text for r in replies] == ["You said: two", "You said: one", "You said: three"]
        assert len(ana.received) == 3  # the replay answered nothing again
        call = thread_call(number, "34600111222", 1)
        logged = await call_entries(call_log, keys, call)
        wamid = {d.id: d.payload["entry"][0]["changes"][0]["value"]["messages"][0]["id"]
                 for d in (m1, m2, m3)}  # fmt: skip
        users = [e["data"]["message"] for e in logged if e["kind"] == "turn.user"]
        agents = [e["data"]["reply_to"] for e in logged if e["kind"] == "turn.agent"]
        assert users == agents == [wamid[m2.id], wamid[m1.id], wamid[m3.id]]
        statuses = [(e["data"]["message"], e["data"]["status"]) for e in logged
                    if e["kind"] == "message.status"]  # fmt: skip
        assert len(statuses) == len(set(statuses)) == 9
        assert {m for m, _ in statuses} == {r.id for r in replies}
        assert fake.refused == []  # the pair rate kept
        attached = await app.expect("call.attached.v1")
        assert attached["call"] == call
        assert [c["call"] for c in await open_calls(call_log, keys)] == [call]


async def test_waiting_messages_are_taken_in_order_when_an_app_holds_the_agent(
    call_log: Listening, keys: Keys, fake: WhatsAppFake, number: str, replica: Any
) -> None:
    async with replica() as one:
        wa = whatsapp_of(one)
        clock = wa.threads.clock = Clock()
        fake.set_webhook_url(hook_url(one))
        old = fake.contact("34600999000", name="Old").send("still open?")
        fake.advance(86_400 + 60)  # a day and a minute: the old contact's window closes
        clock.offset += 86_400 + 60
        ana = fake.contact("34600111222", name="Ana")
        said = [ana.send(text) for text in ("one", "two", "three")]
        async with asyncio.timeout(WAIT_S):
            await fake.webhooks.wait_delivered(4)
            await wa.threads.settled()
        waiting = await agent_log(call_log, keys)
        assert [e["kind"] for e in waiting] == ["message.waiting"] * 4
        assert await open_calls(call_log, keys) == []  # nothing opened while nobody holds it
        async with app_socket(call_log, keys) as app:
            await app.register()
            async with asyncio.timeout(WAIT_S):
                replies = await ana.wait_received(3)
                await wa.threads.settled()
        assert [r.text for r in replies] == ["You said: one", "You said: two", "You said: three"]
        assert fake.refused == []  # a backlog at once, at Meta's per-contact pace
        call = thread_call(number, "34600111222", 1)
        log = await agent_log(call_log, keys)
        seq = {e["data"]["message"]: e["seq"] for e in log if e["kind"] == "message.waiting"}
        taken = [e["data"] for e in log if e["kind"] == "message.taken"]
        ids = [d.payload["entry"][0]["changes"][0]["value"]["messages"][0]["id"] for d in said]
        assert [(t["message"], t["call"], t["waiting_seq"]) for t in taken] == [
            (i, call, seq[i]) for i in ids
        ]
        old_id = old.payload["entry"][0]["changes"][0]["value"]["messages"][0]["id"]
        [expired] = [e["data"] for e in log if e["kind"] == "message.expired"]
        assert expired == {"message": old_id, "waiting_seq": seq[old_id], "why": "window_closed"}
        assert fake.contacts["34600999000"].received == []
        users = [e["data"]["message"] for e in await call_entries(call_log, keys, call)
                 if e["kind"] == "turn.user"]  # fmt: skip
        assert users == ids


async def test_a_thread_ended_timeout_is_followed_by_a_new_call_on_the_next_message(
    call_log: Listening, keys: Keys, fake: WhatsAppFake, number: str, replica: Any
) -> None:
    """The reaper ends a thread quiet two hours (``timeout``, sealed); the contact's next message
    opens the next call of the thread, and the old call is written to no more."""
    async with app_socket(call_log, keys) as app, replica() as one:
        await app.register()
        wa = whatsapp_of(one)
        fake.set_webhook_url(hook_url(one))
        async with asyncio.timeout(WAIT_S):
            await wa.threads.until_held("production", "org_acme", "support-bot")
            # the drain of the backlog that the hold began: a message sent while it runs joins
            # the backlog (message.waiting, no why) and is taken from there
            await wa.threads.settled()
        ana = fake.contact("34600111222", name="Ana")
        ana.send("one")
        async with asyncio.timeout(WAIT_S):
            await ana.wait_received(1)
            await fake.webhooks.wait_delivered(4)  # the message and its three statuses
            await wa.threads.settled()
        first = thread_call(number, "34600111222", 1)
        sealed = await call_log.client.post(
            f"/v1/calls/{first}/seal", json={"outcome": "timeout"}, headers=bearer(keys.service)
        )
        assert sealed.status_code == 200, sealed.text
        before = await call_entries(call_log, keys, first)
        ana.send("two")
        async with asyncio.timeout(WAIT_S):
            [_, reply] = await ana.wait_received(2)
            await fake.webhooks.wait_delivered(8)
            await wa.threads.settled()
        assert reply.text == "You said: two"
        second = thread_call(number, "34600111222", 2)
        assert [c["call"] for c in await open_calls(call_log, keys)] == [second]
        assert await call_entries(call_log, keys, first) == before
        users = [e["data"]["text"] for e in await call_entries(call_log, keys, second)
                 if e["kind"] == "turn.user"]  # fmt: skip
        assert users == ["two"]


async def test_a_thread_moves_between_replicas_and_a_retried_delivery_is_answered_once(
    call_log: Listening, keys: Keys, fake: WhatsAppFake, number: str, replica: Any
) -> None:
    """Meta retries a delivery nobody took until one does, and delivers a thread's messages to
    whichever replica the load balancer picks: each is written and answered once, in order, and
    no replica's stale session loses an entry."""
    from pinecall_servicekit.platform import free_port

    async with app_socket(call_log, keys) as app, replica() as one, replica() as two:
        await app.register()
        async with asyncio.timeout(WAIT_S):
            for r in (one, two):
                await whatsapp_of(r).threads.until_held("production", "org_acme", "support-bot")
                await whatsapp_of(r).threads.settled()
        fake.set_webhook_url(f"http://127.0.0.1:{free_port()}/v1/whatsapp/webhook")  # nobody
        ana = fake.contact("34600111222", name="Ana")
        ana.send("one")
        async with asyncio.timeout(WAIT_S):
            await fake.webhooks.wait_attempts(2)
            assert fake.webhooks.delivered == []
            for n, (to, text) in enumerate(((one, None), (two, "two"), (one, "three")), 1):
                fake.set_webhook_url(hook_url(to))  # the retry goes to the replica now behind it
                if text is not None:
                    ana.send(text)
                await ana.wait_received(n)
                await fake.webhooks.wait_delivered(4 * n)  # the message and its three statuses
                await whatsapp_of(to).threads.settled()
        assert [r.text for r in ana.received] == [f"You said: {t}" for t in ("one", "two", "three")]
        logged = await call_entries(call_log, keys, thread_call(number, "34600111222", 1))
        assert [e["data"]["text"] for e in logged if e["kind"] == "turn.user"] == [
            "one", "two", "three",
        ]  # fmt: skip
        assert len([e for e in logged if e["kind"] == "turn.agent"]) == 3
        statuses = {(e["data"]["message"], e["data"]["status"]) for e in logged
                    if e["kind"] == "message.status"}  # fmt: skip
        assert len(statuses) == 9
        # the contact is kept with the call, so a replica that takes the thread up knows it
        call = thread_call(number, "34600111222", 1)
        got = await call_log.client.get(f"/v1/calls/{call}", headers=bearer(keys.operator))
        assert got.json()["context"]["contact"] == "34600111222"
        kept = [s for s in whatsapp_of(two).threads._sessions.values() if s.record.call == call]
        assert [s.contact for s in kept] == ["34600111222"]


async def _until(probe: Callable[[], Any]) -> Any:
    """``await probe()`` again until it answers something true (call-log says nothing when it
    writes an agent's entry); bound it with a timeout."""
    while True:
        if found := await probe():
            return found
        await asyncio.sleep(0.05)


async def test_a_message_refused_at_its_orgs_quota_waits_and_is_taken_once_a_call_ends(
    call_log: Listening, keys: Keys, fake: WhatsAppFake, number: str, replica: Any,
    dispatcher: Listening,
) -> None:  # fmt: skip
    """The org holds its one call (Ana's thread): Ben's first message cannot open his thread's
    call (429). It waits on the agent's log (``message.waiting``, ``why: "quota"``), and once
    Ana's thread ends it is taken (``message.taken``) and answered, once."""
    quota = await dispatcher.client.post(
        "/v1/ops/quotas",
        json={"org": "org_acme", "environment": "production", "concurrent_calls": 1},
        headers=bearer(keys.operator),
    )
    assert quota.status_code == 200, quota.text
    async with app_socket(call_log, keys) as app, replica() as one:
        await app.register()
        wa = whatsapp_of(one)
        wa.threads.quota_retry_s = 0.2
        fake.set_webhook_url(hook_url(one))
        async with asyncio.timeout(WAIT_S):
            await wa.threads.until_held("production", "org_acme", "support-bot")
            # the drain of the backlog that the hold began: a message sent while it runs joins
            # the backlog (message.waiting, no why) and is taken from there
            await wa.threads.settled()
        ana, ben = fake.contact("34600111222"), fake.contact("34600333444")
        ana.send("one")
        async with asyncio.timeout(WAIT_S):
            await ana.wait_received(1)
        sent = ben.send("hello")
        wamid = sent.payload["entry"][0]["changes"][0]["value"]["messages"][0]["id"]

        async def waiting() -> list[dict[str, Any]]:
            return [e for e in await agent_log(call_log, keys) if e["kind"] == "message.waiting"]

        async with asyncio.timeout(WAIT_S):
            [entry] = await _until(waiting)
        assert (entry["data"]["message"], entry["data"]["why"]) == (wamid, "quota")
        assert ben.received == []
        ended = await call_log.client.post(
            f"/v1/calls/{thread_call(number, '34600111222', 1)}/seal",
            json={"outcome": "timeout"}, headers=bearer(keys.service),
        )  # fmt: skip
        assert ended.status_code == 200, ended.text
        async with asyncio.timeout(WAIT_S):
            [reply] = await ben.wait_received(1)
            await wa.threads.settled()
        assert reply.text == "You said: hello"
        call = thread_call(number, "34600333444", 1)
        taken = [e["data"] for e in await agent_log(call_log, keys) if e["kind"] == "message.taken"]
        assert [(t["message"], t["call"], t["waiting_seq"]) for t in taken] == [
            (wamid, call, entry["seq"])
        ]
        logged = await call_entries(call_log, keys, call)
        assert [e["data"]["message"] for e in logged if e["kind"] == "turn.user"] == [wamid]
        assert [e["data"]["reply_to"] for e in logged if e["kind"] == "turn.agent"] == [wamid]
        assert len(ben.received) == 1


async def test_a_message_for_an_agent_deleted_since_is_let_go_with_its_reason(
    call_log: Listening, keys: Keys, fake: WhatsAppFake, number: str, replica: Any,
    database_url: str,
) -> None:  # fmt: skip
    """The number's agent is gone (its versions deleted under call-log): the dispatcher refuses
    the thread's call (422 ``unknown_agent``), and the message is let go, its reason on the
    agent's log; nothing is opened, nothing sent."""
    import psycopg

    async with app_socket(call_log, keys) as app, replica() as one:
        await app.register()
        wa = whatsapp_of(one)
        fake.set_webhook_url(hook_url(one))
        async with asyncio.timeout(WAIT_S):
            await wa.threads.until_held("production", "org_acme", "support-bot")
            # the drain of the backlog that the hold began: a message sent while it runs joins
            # the backlog (message.waiting, no why) and is taken from there
            await wa.threads.settled()
        async with await psycopg.AsyncConnection.connect(database_url) as conn:
            await conn.execute("DELETE FROM calllog.agent_versions WHERE name = 'support-bot'")
        ana = fake.contact("34600111222")
        sent = ana.send("one")
        async with asyncio.timeout(WAIT_S):
            await fake.webhooks.wait_delivered(1)
            await wa.threads.settled()
        wamid = sent.payload["entry"][0]["changes"][0]["value"]["messages"][0]["id"]
        [gone] = await agent_log(call_log, keys)
        assert gone["kind"] == "message.expired"
        assert (gone["data"]["message"], gone["data"]["why"]) == (wamid, "unknown_agent")
        assert await open_calls(call_log, keys) == []
        assert ana.received == []
