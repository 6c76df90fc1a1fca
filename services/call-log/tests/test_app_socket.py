"""The app socket on one replica (issue 16, "The app socket"; acceptance 2, 4 and 6): the
handshake's close codes, calls handed to a socket holding their agent, parked and handed again,
tool calls once per id, commands once per id, and bad frames refused with nothing written."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import psycopg
import pytest
import stamina

from pinecall_contracts.appsocket import Close
from pinecall_testkit.appsocket import TOOL, App, Serve, app, define, dial, kinds, service
from pinecall_testkit.call_log import Keys, Listening, bearer, opening


@pytest.fixture
async def replica(serve: Serve, keys: Keys) -> AsyncIterator[Listening]:
    async with serve() as one:
        await define(one, keys)
        yield one


async def _open(replica: Listening, keys: Keys, call: str = "call_1", **extra: object) -> None:
    answer = await replica.client.post(
        "/v1/calls", json=opening(call, **extra), headers=bearer(keys.production)
    )
    assert answer.status_code == 200, answer.text


def _ask(replica: Listening, keys: Keys, **tool: object) -> asyncio.Task[dict[str, object]]:
    """The worker asks a tool (its POST waits for the answer)."""

    async def asking() -> dict[str, object]:
        answer = await replica.client.post(
            "/v1/calls/call_1/tools", json=TOOL | tool, headers=bearer(keys.production)
        )
        assert answer.status_code == 200, answer.text
        body: dict[str, object] = answer.json()
        return body

    return asyncio.create_task(asking())


async def _waiting(replica: Listening) -> None:
    calls = service(replica)
    await calls.changes.wait_for(lambda: calls.waiting("call_1", "tc_1") == 1, 10)


# -- the handshake ------------------------------------------------------------------------


async def test_a_bad_key_closes_4001(replica: Listening, keys: Keys) -> None:
    for key in (None, "pk_not-a-key", keys.production):  # none, not good, a fleet key
        async with dial(replica, key) as ws:
            assert await App(ws, "x").closed_with() == Close.BAD_KEY


async def test_another_subprotocol_or_no_common_version_closes_4002(
    replica: Listening, keys: Keys
) -> None:
    async with dial(replica, keys.app, subprotocol="pinecall.app.v9") as ws:
        assert await App(ws, "x").closed_with() == Close.NO_COMMON_VERSION
    async with dial(replica, keys.app) as ws:
        one = App(ws, "x")
        await one.send("hello.v1", versions=[7, 8], instance="x", org="org_acme")
        assert await one.closed_with() == Close.NO_COMMON_VERSION


async def test_anything_but_hello_first_closes_4000(replica: Listening, keys: Keys) -> None:
    async with dial(replica, keys.app) as ws:
        one = App(ws, "x")
        await one.send("agent.register.v1", agent="support-bot")
        assert await one.closed_with() == Close.PROTOCOL


async def test_an_agent_the_org_does_not_define_closes_4003(replica: Listening, keys: Keys) -> None:
    async with app(replica, keys, org="org_other") as other:
        await other.send("agent.register.v1", agent="support-bot")
        error = await other.expect("error.v1")
        assert error["fatal"] is True
        assert await other.closed_with() == Close.AGENT_OUT_OF_SCOPE


async def test_a_second_socket_of_the_same_instance_replaces_the_first(
    replica: Listening, keys: Keys
) -> None:
    async with app(replica, keys, "app-1") as first:
        await first.register()
        await _open(replica, keys)
        assert (await first.expect("call.attached.v1"))["why"] == "new"
        async with app(replica, keys, "app-1") as second:
            assert await first.closed_with() == Close.REPLACED
            assert await second.register() == 1  # the call parked when the first went
            attached = await second.expect("call.attached.v1")
            assert (attached["call"], attached["why"], attached["claimed"]) == (
                "call_1",
                "parked",
                True,
            )


async def test_silence_for_two_heartbeats_closes_4010_and_parks_the_calls(
    serve: Serve, keys: Keys
) -> None:
    async with serve(app_heartbeat_s=0.2) as quick:
        await define(quick, keys)
        async with app(quick, keys, "app-1") as silent:
            await silent.register()
            await _open(quick, keys)
            await silent.expect("call.attached.v1")
            assert await silent.closed_with() == Close.MISSED_HEARTBEAT
        assert "call_1" not in service(quick).hub.holder


# -- calls and tools ----------------------------------------------------------------------


async def test_a_call_opened_is_attached_and_its_tool_answered_once_per_id(
    replica: Listening, keys: Keys
) -> None:
    async with app(replica, keys) as one:
        assert await one.register() == 0
        await _open(replica, keys)
        attached = await one.expect("call.attached.v1")
        assert (attached["call"], attached["app"], attached["state"]) == ("call_1", "app-1", "open")
        assert (attached["claimed"], attached["seq"]) == (False, 1)
        asking = _ask(replica, keys)
        asked = await one.expect("tool.call.v1")
        assert (asked["id"], asked["arguments"], asked["seq"]) == ("tc_1", {"day": "2026-12-02"}, 2)
        await one.send("tool.result.v1", call="call_1", id="tc_1", result={"booked": True})
        ack = await one.expect("tool.result.ack.v1")
        assert (ack["duplicate"], ack["result"], ack["seq"]) == (False, {"booked": True}, 3)
        assert (await asking)["result"] == {"booked": True}
        # the same id again: the stored result, nothing written
        await one.send("tool.result.v1", call="call_1", id="tc_1", result={"booked": False})
        again = await one.expect("tool.result.ack.v1")
        assert (again["duplicate"], again["result"], again["seq"]) == (True, {"booked": True}, 3)
        # a retry of the worker's ask is answered from the log, never sent to the app again
        retry = await replica.client.post(
            "/v1/calls/call_1/tools", json=TOOL, headers=bearer(keys.production)
        )
        assert retry.json()["result"] == {"booked": True}
        await one.nothing_queued()
    log = await kinds(replica, keys)
    assert (log.count("tool.call"), log.count("tool.result")) == (1, 1)


async def test_a_socket_killed_mid_tool_hands_the_call_and_its_tool_to_the_other(
    replica: Listening, keys: Keys
) -> None:
    async with app(replica, keys, "app-1") as first, app(replica, keys, "app-2") as second:
        await first.send("agent.drain.v1")  # nothing registered: said, not left unanswered
        assert (await first.expect("error.v1"))["code"] == "invalid"
        await first.register()
        await second.register()
        await _open(replica, keys)
        await first.expect("call.attached.v1")  # the first registered, on a tie
        asking = _ask(replica, keys)
        await first.expect("tool.call.v1")
        first.kill()
        attached = await second.expect("call.attached.v1")
        assert (attached["call"], attached["why"], attached["claimed"]) == (
            "call_1",
            "handed",
            True,
        )
        asked = await second.expect("tool.call.v1")
        assert asked["id"] == "tc_1"
        await second.send("tool.result.v1", call="call_1", id="tc_1", result="seat 4")
        assert (await second.expect("tool.result.ack.v1"))["duplicate"] is False
        assert (await asking)["result"] == "seat 4"
        await second.nothing_queued()  # the tool call came once
    log = await kinds(replica, keys)
    assert (log.count("tool.call"), log.count("tool.result")) == (1, 1)


async def test_a_console_never_takes_a_call(replica: Listening, keys: Keys) -> None:
    async with app(replica, keys, "console") as console:
        assert await console.register(takes_unclaimed=False) == 0
        async with app(replica, keys, "app-1") as one:
            await one.register()
            await _open(replica, keys)
            await one.expect("call.attached.v1")
        hub = service(replica).hub
        await hub.changes.wait_for(lambda: "call_1" not in hub.holder, 10)
        await console.nothing_queued()  # the parked call did not go to the console
        async with app(replica, keys, "app-2") as two:
            assert await two.register() == 1
            assert (await two.expect("call.attached.v1"))["why"] == "parked"
        await console.nothing_queued()


async def test_a_tool_asked_while_nobody_holds_the_agent_goes_to_the_next_registrant(
    replica: Listening, keys: Keys
) -> None:
    await _open(replica, keys)
    asking = _ask(replica, keys)
    await _waiting(replica)
    async with app(replica, keys) as late:
        assert await late.register() == 1
        attached = await late.expect("call.attached.v1")
        assert (attached["why"], attached["claimed"]) == ("parked", False)
        await late.expect("tool.call.v1")
        await late.send("tool.result.v1", call="call_1", id="tc_1", result="ok")
        await late.expect("tool.result.ack.v1")
    assert (await asking)["result"] == "ok"


async def test_a_tool_nobody_answers_times_out_once_and_a_late_result_is_refused(
    replica: Listening, keys: Keys
) -> None:
    async with app(replica, keys) as slow:
        await slow.register()
        await _open(replica, keys)
        await slow.expect("call.attached.v1")
        asking = _ask(replica, keys, timeout_s=0.3)
        await slow.expect("tool.call.v1")
        assert (await asking)["error"] == "timeout"
        await slow.send("tool.result.v1", call="call_1", id="tc_1", result="too late")
        refused = await slow.expect("error.v1")
        assert (refused["code"], refused["re"]) == ("past_deadline", "tc_1")
    async with app(replica, keys, "app-2") as later:
        assert await later.register() == 1
        await later.expect("call.attached.v1")
        await later.nothing_queued()  # a tool call past its deadline is not sent
    assert (await kinds(replica, keys)).count("tool.result") == 1


async def test_an_ended_call_is_detached(replica: Listening, keys: Keys) -> None:
    async with app(replica, keys) as one:
        await one.register()
        await _open(replica, keys)
        await one.expect("call.attached.v1")
        ended = await replica.client.post(
            "/v1/calls/call_1/end", json={"outcome": "completed"}, headers=bearer(keys.production)
        )
        detached = await one.expect("call.detached.v1")
        assert (detached["why"], detached["seq"]) == ("ended", ended.json()["last_seq"])


# -- commands and drains ------------------------------------------------------------------


async def test_a_command_is_written_once_per_id(replica: Listening, keys: Keys) -> None:
    async with app(replica, keys) as one:
        await one.register()
        await _open(replica, keys)
        await one.expect("call.attached.v1")
        say = {"call": "call_1", "id": "cmd_1", "kind": "say", "text": "One moment."}
        await one.send("call.command.v1", **say)
        first = await one.expect("call.command.ack.v1")
        await one.send("call.command.v1", **say)
        second = await one.expect("call.command.ack.v1")
        assert (first["duplicate"], second["duplicate"]) == (False, True)
        assert first["seq"] == second["seq"] == 2
        await one.send("call.command.v1", call="call_1", id="cmd_2", kind="say")
        assert (await one.expect("error.v1"))["code"] == "invalid"
        # the same id for another command: refused, not acked as the first (a probe's end
        # under a say's id was acked a duplicate and dropped without a word)
        await one.send("call.command.v1", call="call_1", id="cmd_1", kind="end")
        reused = await one.expect("error.v1")
        assert (reused["code"], reused["re"]) == ("conflict", "cmd_1")
    log = await replica.client.get("/v1/calls/call_1/entries", headers=bearer(keys.operator))
    commands = [e for e in log.json()["entries"] if e["kind"] == "call.command"]
    assert [c["data"] for c in commands] == [{"id": "cmd_1", "kind": "say", "text": "One moment."}]


async def test_a_drain_hands_the_calls_and_writes_the_agent_log(
    replica: Listening, keys: Keys
) -> None:
    async with app(replica, keys, "app-1") as first, app(replica, keys, "app-2") as second:
        await first.send("agent.drain.v1")  # nothing registered: said, not left unanswered
        assert (await first.expect("error.v1"))["code"] == "invalid"
        await first.register()
        await _open(replica, keys)
        await first.expect("call.attached.v1")
        await second.register()
        await first.send("agent.drain.v1", agent="support-bot")
        assert (await first.expect("call.detached.v1"))["why"] == "drained"
        draining = await first.expect("agent.draining.v1")
        assert (draining["handed"], draining["parked"], draining["app"]) == (1, 0, "app-1")
        assert (await second.expect("call.attached.v1"))["why"] == "handed"
        await _open(replica, keys, "call_2")  # a new call goes to the one not draining
        assert (await second.expect("call.attached.v1"))["call"] == "call_2"
    log = await replica.client.get(
        "/v1/agents/support-bot/log", headers=bearer(keys.operator),
        params={"environment": "production"},
    )  # fmt: skip
    entries = [e for e in log.json()["entries"] if e["kind"] == "agent.draining"]
    assert [e["data"]["handed"] for e in entries] == [1]


async def test_a_tool_the_draining_socket_runs_is_answered_by_it_and_sent_to_nobody_else(
    replica: Listening, keys: Keys
) -> None:
    """Acceptance 3, "tools it is running still answer": the call goes to the other socket at
    once, the tool it was asked stays with the socket running it (found by review: it was sent
    again to the new holder, so it ran twice)."""
    async with app(replica, keys, "app-1") as first, app(replica, keys, "app-2") as second:
        await first.register()
        await _open(replica, keys)
        await first.expect("call.attached.v1")
        await second.register()
        asking = _ask(replica, keys)
        await first.expect("tool.call.v1")
        await first.send("agent.drain.v1", agent="support-bot")
        assert (await first.expect("call.detached.v1"))["why"] == "drained"
        assert (await first.expect("agent.draining.v1"))["handed"] == 1
        assert (await second.expect("call.attached.v1"))["why"] == "handed"
        retry = _ask(replica, keys)  # the worker's retry of the same id, on this replica
        await _waiting_twice(replica)
        await second.nothing_queued()  # neither the hand nor the retry sent it here
        await first.send("tool.result.v1", call="call_1", id="tc_1", result="seat 4")
        assert (await first.expect("tool.result.ack.v1"))["duplicate"] is False
        assert (await asking)["result"] == (await retry)["result"] == "seat 4"
        await second.nothing_queued()
    log = await kinds(replica, keys)
    assert (log.count("tool.call"), log.count("tool.result")) == (1, 1)


async def test_a_tool_the_draining_socket_lets_go_unanswered_goes_to_the_next_holder(
    replica: Listening, keys: Keys
) -> None:
    """The draining socket closes before it answers: the tool goes, after ``call.attached``,
    to the socket that holds the call then (here one that registered while the call was
    parked), within what is left of its deadline."""
    async with app(replica, keys, "app-1") as first:
        await first.register()
        await _open(replica, keys)
        await first.expect("call.attached.v1")
        asking = _ask(replica, keys)
        asked = await first.expect("tool.call.v1")
        await first.send("agent.drain.v1")
        await first.expect("call.detached.v1")
        assert (await first.expect("agent.draining.v1"))["parked"] == 1
        async with app(replica, keys, "app-2") as second:
            assert await second.register() == 1
            assert (await second.expect("call.attached.v1"))["why"] == "parked"
            await second.nothing_queued()  # the first still runs it
            first.kill()
            again = await second.expect("tool.call.v1")
            assert (again["id"], again["deadline"]) == ("tc_1", asked["deadline"])
            await second.send("tool.result.v1", call="call_1", id="tc_1", result="seat 5")
            await second.expect("tool.result.ack.v1")
            assert (await asking)["result"] == "seat 5"
            await second.nothing_queued()
    log = await kinds(replica, keys)
    assert (log.count("tool.call"), log.count("tool.result")) == (1, 1)


async def _waiting_twice(replica: Listening) -> None:
    calls = service(replica)
    await calls.changes.wait_for(lambda: calls.waiting("call_1", "tc_1") == 2, 10)


# -- bad input: an error frame or a documented close, nothing written ---------------------


async def test_bad_frames_get_error_frames_and_the_socket_goes_on(
    replica: Listening, keys: Keys
) -> None:
    await _open(replica, keys, "call_other", org="org_other")
    async with app(replica, keys) as one:
        await one.register()
        await one.ws.send("{not json")
        assert (await one.expect("error.v1"))["code"] == "malformed"
        await one.send("call.transfer.v1", call="call_1")
        assert (await one.expect("error.v1"))["code"] == "unknown_type"
        await one.send("tool.result.v1", call="call_1", id="tc_1", result=1, error=7)
        assert (await one.expect("error.v1"))["code"] == "malformed"
        # another org's call, a call not held: refused, nothing written
        for call in ("call_other", "call_9"):
            await one.send("tool.result.v1", call=call, id="tc_1", result="x")
            refused = await one.expect("error.v1")
            assert (refused["code"], refused["re"]) == ("not_held", call)  # what is not held
            await one.send("call.command.v1", call=call, id="c1", kind="end")
            refused = await one.expect("error.v1")
            assert (refused["code"], refused["re"]) == ("not_held", call)
        await one.nothing_queued()
    assert await kinds(replica, keys, "call_other") == ["call.started"]


async def test_frames_the_store_or_the_decoder_cannot_take_get_error_frames(
    replica: Listening, keys: Keys
) -> None:
    """Found by a probe: a frame nested 1 000 deep, a NUL (Postgres keeps none) and a type that
    is no string closed the socket with no code and logged nothing; a tool result over 64 KiB
    was written whole. Each is an error frame now, the socket goes on, nothing is written."""
    async with app(replica, keys) as one:
        await one.register()
        await _open(replica, keys)
        await one.expect("call.attached.v1")
        ask = _ask(replica, keys, timeout_s=5)
        await one.expect("tool.call.v1")
        deep = "[" * 1000 + "]" * 1000
        await one.ws.send('{"type": "ping.v1", "x": ' + deep + "}")
        assert (await one.expect("error.v1"))["code"] == "malformed"
        await one.ws.send('{"type": {}}')
        refused = await one.expect("error.v1")
        assert (refused["code"], refused["message"]) == (
            "malformed", 'a frame names its type, a string ("type")'
        )  # fmt: skip
        await one.send("call.command.v1", call="call_1", id="c_nul", kind="say", text="a\u0000b")
        assert (await one.expect("error.v1"))["code"] == "invalid"
        await one.send("tool.result.v1", call="call_1", id="tc_1", result="x" * 70_000)
        too_big = await one.expect("error.v1")
        assert (too_big["code"], too_big["re"]) == ("invalid", "tc_1")
        assert "calls.MAX_ENTRY_BYTES" in too_big["message"]
        await one.send("tool.result.v1", call="call_1", id="tc_1", result="booked")
        assert (await one.expect("tool.result.ack.v1"))["duplicate"] is False
        assert (await ask)["result"] == "booked"
    assert await kinds(replica, keys) == ["call.started", "tool.call", "tool.result"]


async def test_a_frame_over_the_limit_closes_1009(serve: Serve, keys: Keys) -> None:
    async with serve(app_max_frame_bytes=1024) as small, app(small, keys) as one:
        await one.send("ping.v1", pad="x" * 2000)
        assert await one.closed_with() == Close.TOO_BIG


async def test_a_result_being_written_when_its_socket_goes_is_written_and_not_asked_again(
    replica: Listening, keys: Keys, database_url: str
) -> None:
    """A socket that ends (replaced here; a dead writer or a missed heartbeat alike) while the
    tool.result it sent last is being written: the write completes before the call is handed,
    so the next holder is not asked the tool again (helper 14's probe: the reader was cancelled
    mid-write, the write rolled back, and the tool ran twice)."""
    async with app(replica, keys, "app-1") as first:
        await first.register()
        await _open(replica, keys)
        await first.expect("call.attached.v1")
        asking = _ask(replica, keys)
        await first.expect("tool.call.v1")
        async with await psycopg.AsyncConnection.connect(database_url) as holder:
            # hold the call's head as another writer would: the result's write waits on it
            await holder.execute("SELECT 1 FROM calllog.calls WHERE call_id = 'call_1' FOR UPDATE")
            await first.send("tool.result.v1", call="call_1", id="tc_1", result={"booked": True})
            await _blocked_on_the_head(database_url)
            [held] = service(replica).hub.sockets.values()
            async with app(replica, keys, "app-1") as second:
                async with asyncio.timeout(10):
                    await held.closed.wait()  # replaced while its result waits on the head
                await holder.commit()
                assert await first.closed_with() == Close.REPLACED
                assert (await asking)["result"] == {"booked": True}
                await second.register()
                assert (await second.expect("call.attached.v1"))["call"] == "call_1"
                await second.nothing_queued()  # no tool.call: it was answered
    log = await kinds(replica, keys)
    assert (log.count("tool.call"), log.count("tool.result")) == (1, 1)


async def _blocked_on_the_head(database_url: str) -> None:
    """Until a session of call-log waits on a row lock in the test's database."""
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        async for attempt in stamina.retry_context(
            on=AssertionError, attempts=None, timeout=10, wait_initial=0.02, wait_max=0.1
        ):
            with attempt:
                row = await (
                    await conn.execute(
                        "SELECT count(*) FROM pg_stat_activity"
                        " WHERE datname = current_database() AND wait_event_type = 'Lock'"
                    )
                ).fetchone()
                assert row is not None
                assert row[0] >= 1
