"""The app socket on one replica (issue 16, "The app socket"; acceptance 2 and 6): the
handshake's close codes, a socket replaced or silent, and bad frames refused with nothing
written. Calls and tools: test_app_socket.py."""

from __future__ import annotations

import asyncio

import psycopg

from pinecall_contracts.appsocket import Close
from pinecall_testkit.appsocket import (
    App,
    Serve,
    app,
    ask,
    define,
    dial,
    kinds,
    open_call,
    service,
)
from pinecall_testkit.call_log import Keys, Listening, lock_waited_on

# -- the handshake ------------------------------------------------------------------------


async def test_a_bad_key_closes_4001(socket_replica: Listening, keys: Keys) -> None:
    for key in (None, "pk_not-a-key", keys.production):  # none, not good, a fleet key
        async with dial(socket_replica, key) as ws:
            assert await App(ws, "x").closed_with() == Close.BAD_KEY


async def test_another_subprotocol_or_no_common_version_closes_4002(
    socket_replica: Listening, keys: Keys
) -> None:
    async with dial(socket_replica, keys.app, subprotocol="pinecall.app.v9") as ws:
        assert await App(ws, "x").closed_with() == Close.NO_COMMON_VERSION
    async with dial(socket_replica, keys.app) as ws:
        one = App(ws, "x")
        await one.send("hello.v1", versions=[7, 8], instance="x", org="org_acme")
        assert await one.closed_with() == Close.NO_COMMON_VERSION


async def test_anything_but_hello_first_closes_4000(socket_replica: Listening, keys: Keys) -> None:
    async with dial(socket_replica, keys.app) as ws:
        one = App(ws, "x")
        await one.send("agent.register.v1", agent="support-bot")
        assert await one.closed_with() == Close.PROTOCOL


async def test_an_agent_the_org_does_not_define_closes_4003(
    socket_replica: Listening, keys: Keys
) -> None:
    async with app(socket_replica, keys, org="org_other") as other:
        await other.send("agent.register.v1", agent="support-bot")
        error = await other.expect("error.v1")
        assert error["fatal"] is True
        assert await other.closed_with() == Close.AGENT_OUT_OF_SCOPE


async def test_a_second_socket_of_the_same_instance_replaces_the_first(
    socket_replica: Listening, keys: Keys
) -> None:
    async with app(socket_replica, keys, "app-1") as first:
        await first.register()
        await open_call(socket_replica, keys)
        assert (await first.expect("call.attached.v1"))["why"] == "new"
        async with app(socket_replica, keys, "app-1") as second:
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
            await open_call(quick, keys)
            await silent.expect("call.attached.v1")
            assert await silent.closed_with() == Close.MISSED_HEARTBEAT
        assert "call_1" not in service(quick).hub.holder


# -- bad input: an error frame or a documented close, nothing written ---------------------


async def test_bad_frames_get_error_frames_and_the_socket_goes_on(
    socket_replica: Listening, keys: Keys
) -> None:
    await open_call(socket_replica, keys, "call_other", org="org_other")
    async with app(socket_replica, keys) as one:
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
    assert await kinds(socket_replica, keys, "call_other") == ["call.started"]


async def test_frames_the_store_or_the_decoder_cannot_take_get_error_frames(
    socket_replica: Listening, keys: Keys
) -> None:
    """Found by a probe: a frame nested 1 000 deep, a NUL (Postgres keeps none) and a type that
    is no string closed the socket with no code and logged nothing; a tool result over 64 KiB
    was written whole. Each is an error frame now, the socket goes on, nothing is written."""
    async with app(socket_replica, keys) as one:
        await one.register()
        await open_call(socket_replica, keys)
        await one.expect("call.attached.v1")
        asking = ask(socket_replica, keys, timeout_s=5)
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
        assert (await asking)["result"] == "booked"
    assert await kinds(socket_replica, keys) == ["call.started", "tool.call", "tool.result"]


async def test_a_frame_over_the_limit_closes_1009(serve: Serve, keys: Keys) -> None:
    async with serve(app_max_frame_bytes=1024) as small, app(small, keys) as one:
        await one.send("ping.v1", pad="x" * 2000)
        assert await one.closed_with() == Close.TOO_BIG


async def test_a_result_being_written_when_its_socket_goes_is_written_and_not_asked_again(
    socket_replica: Listening, keys: Keys, database_url: str
) -> None:
    """A socket that ends (replaced here; a dead writer or a missed heartbeat alike) while the
    tool.result it sent last is being written: the write completes before the call is handed,
    so the next holder is not asked the tool again (helper 14's probe: the reader was cancelled
    mid-write, the write rolled back, and the tool ran twice)."""
    async with app(socket_replica, keys, "app-1") as first:
        await first.register()
        await open_call(socket_replica, keys)
        await first.expect("call.attached.v1")
        asking = ask(socket_replica, keys)
        await first.expect("tool.call.v1")
        async with await psycopg.AsyncConnection.connect(database_url) as holder:
            # hold the call's head as another writer would: the result's write waits on it
            await holder.execute("SELECT 1 FROM calllog.calls WHERE call_id = 'call_1' FOR UPDATE")
            await first.send("tool.result.v1", call="call_1", id="tc_1", result={"booked": True})
            await lock_waited_on(database_url)
            [held] = service(socket_replica).hub.sockets.values()
            async with app(socket_replica, keys, "app-1") as second:
                async with asyncio.timeout(10):
                    await held.closed.wait()  # replaced while its result waits on the head
                await holder.commit()
                assert await first.closed_with() == Close.REPLACED
                assert (await asking)["result"] == {"booked": True}
                await second.register()
                assert (await second.expect("call.attached.v1"))["call"] == "call_1"
                await second.nothing_queued()  # no tool.call: it was answered
    log = await kinds(socket_replica, keys)
    assert (log.count("tool.call"), log.count("tool.result")) == (1, 1)
