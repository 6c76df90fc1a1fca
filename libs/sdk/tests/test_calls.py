"""A call as the app serves it, against a real call-log: commands once per id, acknowledged or
refused; hooks when a call is attached and detached; the heartbeat that keeps a quiet socket."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pinecall import App, Call, CommandRefused
from pinecall_testkit.appsocket import WAIT_S, Serve, define, open_call, service
from pinecall_testkit.call_log import Keys, Listening, bearer
from pinecall_testkit.relay import Relay


def _app(url: str, keys: Keys, booking: dict[str, Any]) -> App:
    app = App(url, keys.app, org="org_acme", instance="app-1")
    app.agent("booking", definition=booking)
    return app


async def test_commands_are_done_once_per_id_and_hooks_see_the_call_come_and_go(
    replica: Listening, keys: Keys, booking: dict[str, Any], prompt_hash: str
) -> None:
    app = _app(replica.url, keys, booking)
    seen: list[tuple[str, str, str | None]] = []

    @app.agents["booking"].on_call("attached")
    async def came(call: Call) -> None:
        seen.append(("attached", call.why, call.detached))

    @app.agents["booking"].on_call("detached")
    async def went(call: Call) -> None:
        seen.append(("detached", call.why, call.detached))

    async with app.running():
        await open_call(replica, keys, agent="booking", prompt_hash=prompt_hash)
        await app.wait_for(lambda: app.holds("call_1"))
        call = app.calls["call_1"]
        first = await call.say("One moment.", id="say-1")
        again = await call.say("One moment.", id="say-1")
        assert (first.duplicate, again.duplicate, again.seq) == (False, True, first.seq)
        with pytest.raises(ValueError, match="say needs its text"):
            await call.say("")
        with pytest.raises(ValueError, match="at most 2000"):
            await call.say("x" * 2001)
        with pytest.raises(CommandRefused) as refused:
            await app.command("call_9", "end", None)
        assert refused.value.code == "not_held"
        await call.end("Goodbye.", id="end-1")
        ended = await replica.client.post(  # the worker follows the end and ends the call
            "/v1/calls/call_1/end", json={"outcome": "completed"}, headers=bearer(keys.production)
        )
        assert ended.status_code == 200, ended.text
        await app.wait_for(lambda: not app.holds("call_1") and app.busy == 0)
        assert not call.held
    assert seen == [("attached", "new", None), ("detached", "new", "ended")]
    log = await replica.client.get("/v1/calls/call_1/entries", headers=bearer(keys.operator))
    commands = [e["data"] for e in log.json()["entries"] if e["kind"] == "call.command"]
    assert [(c["id"], c["kind"]) for c in commands] == [("say-1", "say"), ("end-1", "end")]


async def test_a_command_made_while_the_socket_was_down_is_sent_once_the_call_is_back(
    replica: Listening, keys: Keys, booking: dict[str, Any], prompt_hash: str
) -> None:
    hub = service(replica).hub
    async with Relay.before(replica.url) as relay:
        app = _app(relay.url, keys, booking)
        async with app.running():
            await open_call(replica, keys, agent="booking", prompt_hash=prompt_hash)
            await app.wait_for(lambda: app.holds("call_1"))
            call = app.calls["call_1"]
            relay.hold()
            relay.cut()
            await hub.changes.wait_for(lambda: "call_1" not in hub.holder, 10)  # parked
            await app.wait_for(lambda: not app.calls)
            saying = asyncio.create_task(call.say("Still there?"))  # waits for the call
            relay.release()
            ack = await saying
            assert (ack.call, ack.duplicate) == ("call_1", False)
            assert call.detached == "lost"
            assert app.calls["call_1"].why == "parked"  # the same call, handed back
    log = await replica.client.get("/v1/calls/call_1/entries", headers=bearer(keys.operator))
    commands = [e["data"]["text"] for e in log.json()["entries"] if e["kind"] == "call.command"]
    assert commands == ["Still there?"]


async def test_the_heartbeat_keeps_a_quiet_socket_open(
    serve: Serve, keys: Keys, booking: dict[str, Any]
) -> None:
    async with serve(app_heartbeat_s=0.2) as quick:  # silent for 0.4 s: closed 4010
        await define(quick, keys, body=booking)
        app = _app(quick.url, keys, booking)
        hub = service(quick).hub
        async with app.running():
            first = hub.sockets["production", "org_acme", "app-1"]
            async with asyncio.timeout(WAIT_S):  # a failure bound, never a pace
                await app.wait_for(lambda: app.heartbeats >= 6)  # 0.6 s of pings answered
            assert hub.sockets["production", "org_acme", "app-1"] is first
            assert first.closing is None
