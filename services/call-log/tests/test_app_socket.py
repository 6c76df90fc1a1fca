"""The app socket on one replica (issue 16, "The app socket"; acceptance 2, 4 and 6): calls
handed to a socket holding their agent, parked and handed again, tool calls once per id,
commands once per id, drains. The handshake's close codes and bad frames:
test_app_socket_frames.py."""

from __future__ import annotations

from pinecall_testkit.appsocket import (
    TOOL,
    app,
    ask,
    kinds,
    open_call,
    service,
)
from pinecall_testkit.call_log import Keys, Listening, bearer


async def _waiting(socket_replica: Listening) -> None:
    calls = service(socket_replica)
    await calls.changes.wait_for(lambda: calls.tools.waiting("call_1", "tc_1") == 1, 10)


# -- calls and tools ----------------------------------------------------------------------


async def test_a_call_opened_is_attached_and_its_tool_answered_once_per_id(
    socket_replica: Listening, keys: Keys
) -> None:
    async with app(socket_replica, keys) as one:
        assert await one.register() == 0
        await open_call(socket_replica, keys)
        attached = await one.expect("call.attached.v1")
        assert (attached["call"], attached["app"], attached["state"]) == ("call_1", "app-1", "open")
        assert (attached["claimed"], attached["seq"]) == (False, 1)
        asking = ask(socket_replica, keys)
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
        retry = await socket_replica.client.post(
            "/v1/calls/call_1/tools", json=TOOL, headers=bearer(keys.production)
        )
        assert retry.json()["result"] == {"booked": True}
        await one.nothing_queued()
    log = await kinds(socket_replica, keys)
    assert (log.count("tool.call"), log.count("tool.result")) == (1, 1)


async def test_a_socket_killed_mid_tool_hands_the_call_and_its_tool_to_the_other(
    socket_replica: Listening, keys: Keys
) -> None:
    async with (
        app(socket_replica, keys, "app-1") as first,
        app(socket_replica, keys, "app-2") as second,
    ):
        await first.send("agent.drain.v1")  # nothing registered: said, not left unanswered
        assert (await first.expect("error.v1"))["code"] == "invalid"
        await first.register()
        await second.register()
        await open_call(socket_replica, keys)
        await first.expect("call.attached.v1")  # the first registered, on a tie
        asking = ask(socket_replica, keys)
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
    log = await kinds(socket_replica, keys)
    assert (log.count("tool.call"), log.count("tool.result")) == (1, 1)


async def test_a_console_never_takes_a_call(socket_replica: Listening, keys: Keys) -> None:
    async with app(socket_replica, keys, "console") as console:
        assert await console.register(takes_unclaimed=False) == 0
        async with app(socket_replica, keys, "app-1") as one:
            await one.register()
            await open_call(socket_replica, keys)
            await one.expect("call.attached.v1")
        hub = service(socket_replica).hub
        await hub.changes.wait_for(lambda: "call_1" not in hub.holder, 10)
        await console.nothing_queued()  # the parked call did not go to the console
        async with app(socket_replica, keys, "app-2") as two:
            assert await two.register() == 1
            assert (await two.expect("call.attached.v1"))["why"] == "parked"
        await console.nothing_queued()


async def test_a_tool_asked_while_nobody_holds_the_agent_goes_to_the_next_registrant(
    socket_replica: Listening, keys: Keys
) -> None:
    await open_call(socket_replica, keys)
    asking = ask(socket_replica, keys)
    await _waiting(socket_replica)
    async with app(socket_replica, keys) as late:
        assert await late.register() == 1
        attached = await late.expect("call.attached.v1")
        assert (attached["why"], attached["claimed"]) == ("parked", False)
        await late.expect("tool.call.v1")
        await late.send("tool.result.v1", call="call_1", id="tc_1", result="ok")
        await late.expect("tool.result.ack.v1")
    assert (await asking)["result"] == "ok"


async def test_a_tool_nobody_answers_times_out_once_and_a_late_result_is_refused(
    socket_replica: Listening, keys: Keys
) -> None:
    async with app(socket_replica, keys) as slow:
        await slow.register()
        await open_call(socket_replica, keys)
        await slow.expect("call.attached.v1")
        asking = ask(socket_replica, keys, timeout_s=0.3)
        await slow.expect("tool.call.v1")
        assert (await asking)["error"] == "timeout"
        await slow.send("tool.result.v1", call="call_1", id="tc_1", result="too late")
        refused = await slow.expect("error.v1")
        assert (refused["code"], refused["re"]) == ("past_deadline", "tc_1")
    async with app(socket_replica, keys, "app-2") as later:
        assert await later.register() == 1
        await later.expect("call.attached.v1")
        await later.nothing_queued()  # a tool call past its deadline is not sent
    assert (await kinds(socket_replica, keys)).count("tool.result") == 1


async def test_an_ended_call_is_detached(socket_replica: Listening, keys: Keys) -> None:
    async with app(socket_replica, keys) as one:
        await one.register()
        await open_call(socket_replica, keys)
        await one.expect("call.attached.v1")
        ended = await socket_replica.client.post(
            "/v1/calls/call_1/end", json={"outcome": "completed"}, headers=bearer(keys.production)
        )
        detached = await one.expect("call.detached.v1")
        assert (detached["why"], detached["seq"]) == ("ended", ended.json()["last_seq"])


# -- commands and drains ------------------------------------------------------------------


async def test_a_command_is_written_once_per_id(socket_replica: Listening, keys: Keys) -> None:
    async with app(socket_replica, keys) as one:
        await one.register()
        await open_call(socket_replica, keys)
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
    log = await socket_replica.client.get("/v1/calls/call_1/entries", headers=bearer(keys.operator))
    commands = [e for e in log.json()["entries"] if e["kind"] == "call.command"]
    assert [c["data"] for c in commands] == [{"id": "cmd_1", "kind": "say", "text": "One moment."}]


async def test_a_drain_hands_the_calls_and_writes_the_agent_log(
    socket_replica: Listening, keys: Keys
) -> None:
    async with (
        app(socket_replica, keys, "app-1") as first,
        app(socket_replica, keys, "app-2") as second,
    ):
        await first.send("agent.drain.v1")  # nothing registered: said, not left unanswered
        assert (await first.expect("error.v1"))["code"] == "invalid"
        await first.register()
        await open_call(socket_replica, keys)
        await first.expect("call.attached.v1")
        await second.register()
        await first.send("agent.drain.v1", agent="support-bot")
        assert (await first.expect("call.detached.v1"))["why"] == "drained"
        draining = await first.expect("agent.draining.v1")
        assert (draining["handed"], draining["parked"], draining["app"]) == (1, 0, "app-1")
        assert (await second.expect("call.attached.v1"))["why"] == "handed"
        await open_call(socket_replica, keys, "call_2")  # a new call goes to the one not draining
        assert (await second.expect("call.attached.v1"))["call"] == "call_2"
    log = await socket_replica.client.get(
        "/v1/agents/support-bot/log", headers=bearer(keys.operator),
        params={"environment": "production"},
    )  # fmt: skip
    entries = [e for e in log.json()["entries"] if e["kind"] == "agent.draining"]
    assert [e["data"]["handed"] for e in entries] == [1]


async def test_a_tool_the_draining_socket_runs_is_answered_by_it_and_sent_to_nobody_else(
    socket_replica: Listening, keys: Keys
) -> None:
    """Acceptance 3, "tools it is running still answer": the call goes to the other socket at
    once, the tool it was asked stays with the socket running it (found by review: it was sent
    again to the new holder, so it ran twice)."""
    async with (
        app(socket_replica, keys, "app-1") as first,
        app(socket_replica, keys, "app-2") as second,
    ):
        await first.register()
        await open_call(socket_replica, keys)
        await first.expect("call.attached.v1")
        await second.register()
        asking = ask(socket_replica, keys)
        await first.expect("tool.call.v1")
        await first.send("agent.drain.v1", agent="support-bot")
        assert (await first.expect("call.detached.v1"))["why"] == "drained"
        assert (await first.expect("agent.draining.v1"))["handed"] == 1
        assert (await second.expect("call.attached.v1"))["why"] == "handed"
        retry = ask(socket_replica, keys)  # the worker's retry of the same id, on this replica
        await _waiting_twice(socket_replica)
        await second.nothing_queued()  # neither the hand nor the retry sent it here
        await first.send("tool.result.v1", call="call_1", id="tc_1", result="seat 4")
        assert (await first.expect("tool.result.ack.v1"))["duplicate"] is False
        assert (await asking)["result"] == (await retry)["result"] == "seat 4"
        await second.nothing_queued()
    log = await kinds(socket_replica, keys)
    assert (log.count("tool.call"), log.count("tool.result")) == (1, 1)


async def test_a_tool_the_draining_socket_lets_go_unanswered_goes_to_the_next_holder(
    socket_replica: Listening, keys: Keys
) -> None:
    """The draining socket closes before it answers: the tool goes, after ``call.attached``,
    to the socket that holds the call then (here one that registered while the call was
    parked), within what is left of its deadline."""
    async with app(socket_replica, keys, "app-1") as first:
        await first.register()
        await open_call(socket_replica, keys)
        await first.expect("call.attached.v1")
        asking = ask(socket_replica, keys)
        asked = await first.expect("tool.call.v1")
        await first.send("agent.drain.v1")
        await first.expect("call.detached.v1")
        assert (await first.expect("agent.draining.v1"))["parked"] == 1
        async with app(socket_replica, keys, "app-2") as second:
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
    log = await kinds(socket_replica, keys)
    assert (log.count("tool.call"), log.count("tool.result")) == (1, 1)


async def _waiting_twice(socket_replica: Listening) -> None:
    calls = service(socket_replica)
    await calls.changes.wait_for(lambda: calls.tools.waiting("call_1", "tc_1") == 2, 10)
