"""Tools answered once per id, against a real call-log (issue 16, "The app's SDK"; acceptance 4):
a handler still running when the socket goes answers on the next socket and is not run again; a
result made while the socket was down is sent again when the tool call is asked again, not run
again; a tool asked while no app holds the agent is answered by the next app that registers; a
handler that fails answers an error the model can speak around."""

from __future__ import annotations

import asyncio
from typing import Any

from pinecall import App, ToolContext, ToolError
from pinecall_contracts.appsocket import Close
from pinecall_testkit.appsocket import ask, kinds, open_call, service
from pinecall_testkit.call_log import Keys, Listening
from pinecall_testkit.relay import Relay

ARGUMENTS = {"time": "19:00", "party": 2}


def _app(url: str, keys: Keys, booking: dict[str, Any], instance: str = "app-1") -> App:
    app = App(url, keys.app, org="org_acme", instance=instance, reconnect_wait_max_s=0.5)
    app.agent("booking", definition=booking)
    return app


class Gate:
    """A handler that counts its runs and answers only once the test lets it."""

    def __init__(self) -> None:
        self.runs: list[str] = []
        self.started = asyncio.Event()
        self.release = asyncio.Event()

    async def __call__(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        self.runs.append(context.id)
        self.started.set()
        await self.release.wait()
        return {"available": True, "party": arguments["party"]}


async def test_a_handler_running_when_the_socket_goes_answers_once_on_the_next(
    replica: Listening, keys: Keys, booking: dict[str, Any], prompt_hash: str
) -> None:
    app = _app(replica.url, keys, booking)
    gate = Gate()
    app.agents["booking"].tool("check_availability")(gate)
    hub = service(replica).hub
    async with app.running():
        await open_call(replica, keys, agent="booking", prompt_hash=prompt_hash)
        asking = ask(replica, keys, name="check_availability", arguments=ARGUMENTS)
        await gate.started.wait()
        first = hub.holder["call_1"]
        first.close(Close.GOING_AWAY, "the replica stops")  # the app reconnects at once
        await hub.changes.wait_for(
            lambda: (
                (now := hub.holder.get("call_1")) is not None
                and now is not first
                and ("call_1", "tc_1") in now.sent
            ),
            10,
        )
        await app.wait_for(lambda: app.answers.heard == 2)  # the same id, asked again
        gate.release.set()
        assert (await asking)["result"] == {"available": True, "party": 2}
    assert gate.runs == ["tc_1"]
    log = await kinds(replica, keys)
    assert (log.count("tool.call"), log.count("tool.result")) == (1, 1)


async def test_a_result_made_while_the_socket_was_down_is_sent_again_and_not_run_again(
    replica: Listening, keys: Keys, booking: dict[str, Any], prompt_hash: str
) -> None:
    hub = service(replica).hub
    async with Relay.before(replica.url) as relay:
        app = _app(relay.url, keys, booking)
        gate = Gate()
        app.agents["booking"].tool("check_availability")(gate)
        async with app.running():
            await open_call(replica, keys, agent="booking", prompt_hash=prompt_hash)
            asking = ask(replica, keys, name="check_availability", arguments=ARGUMENTS)
            await gate.started.wait()
            relay.hold()
            relay.cut()  # the network between the app and call-log fails
            await hub.changes.wait_for(lambda: "call_1" not in hub.holder, 10)  # parked
            await app.wait_for(lambda: not app.calls)
            gate.release.set()
            await app.wait_for(lambda: app.busy == 0)  # answered, kept: no socket to send it on
            relay.release()
            assert (await asking)["result"] == {"available": True, "party": 2}
            assert app.answers.heard == 2
    assert gate.runs == ["tc_1"]
    assert relay.connections == 2
    log = await kinds(replica, keys)
    assert (log.count("tool.call"), log.count("tool.result")) == (1, 1)


async def test_a_tool_asked_while_no_app_holds_the_agent_goes_to_the_next_that_registers(
    replica: Listening, keys: Keys, booking: dict[str, Any], prompt_hash: str
) -> None:
    await open_call(replica, keys, agent="booking", prompt_hash=prompt_hash)
    asking = ask(replica, keys, name="check_availability", arguments=ARGUMENTS)
    calls = service(replica)
    await calls.changes.wait_for(lambda: calls.tools.waiting("call_1", "tc_1") == 1, 10)
    app = _app(replica.url, keys, booking)
    agent = app.agents["booking"]
    attached: list[tuple[str, str, bool]] = []

    @agent.on_call("attached")
    def seen(call: Any) -> None:  # a plain function: run in a thread
        attached.append((call.id, call.why, call.claimed))

    @agent.tool("check_availability")
    def check(arguments: dict[str, Any], context: ToolContext) -> Any:
        return {"available": arguments["party"] <= 4, "call": context.call.id}

    async with app.running():
        assert (await asking)["result"] == {"available": True, "call": "call_1"}
        await app.wait_for(lambda: app.busy == 0 and app.calls["call_1"].prompt_matches is not None)
        assert app.calls["call_1"].prompt_matches is True  # call.setup sent: the call's prompt
    assert attached == [("call_1", "parked", False)]
    assert app.answers.runs == 1


async def test_a_handler_that_fails_answers_an_error_the_model_can_speak_around(
    replica: Listening, keys: Keys, booking: dict[str, Any], prompt_hash: str
) -> None:
    app = _app(replica.url, keys, booking)
    agent = app.agents["booking"]

    @agent.tool("book_table")
    async def book(arguments: dict[str, Any], context: ToolContext) -> Any:
        if arguments["party"] > 8:
            raise ToolError("We seat at most eight.")
        if arguments["party"] > 4:
            raise RuntimeError("the booking system is down")
        return object()  # not JSON

    async with app.running():
        await open_call(replica, keys, agent="booking", prompt_hash=prompt_hash)
        answers = [
            await ask(replica, keys, id=f"tc_{n}", name=name, arguments={"party": party})
            for n, (name, party) in enumerate(
                [("book_table", 9), ("book_table", 6), ("book_table", 2), ("cancel", 1)]
            )
        ]
    assert [(a["result"], a["error"]) for a in answers] == [
        (None, "We seat at most eight."),
        (None, "the tool book_table failed"),
        (None, "the tool book_table answered what is not JSON"),
        (None, "the app has no handler for the tool cancel"),
    ]
