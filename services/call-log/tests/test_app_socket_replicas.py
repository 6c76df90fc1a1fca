"""The app socket on two call-log replicas (issue 16, acceptance 2): a call opened on one replica
for an agent whose socket is on the other is handed there; a tool call asked on one reaches the
socket on the other and its result wakes the worker waiting on the first; a socket killed hands
its call and its waiting tool call to a socket on the other replica; a replica that stops being
heard has its calls taken back and handed."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import sqlalchemy as sa

from pinecall_call_log.store.tables import APP_HOLDS, TOOL_HOLDS
from pinecall_servicekit import db
from pinecall_testkit.appsocket import TOOL, Serve, app, ask, define, kinds, open_call, service
from pinecall_testkit.call_log import Keys, Listening, bearer


@pytest.fixture
async def pair(serve: Serve, keys: Keys) -> AsyncIterator[tuple[Listening, Listening]]:
    async with serve(app_announce_s=0.2) as a, serve(app_announce_s=0.2) as b:
        await define(a, keys)
        yield a, b


async def _hears_taker(replica: Listening, other: Listening) -> None:
    """``replica`` heard that ``other``'s sockets take support-bot."""
    hub, name = service(replica).hub, service(other).hub.replica
    await hub.changes.wait_for(
        lambda: name in hub.takers("production", "org_acme", "support-bot"), 10
    )


async def test_a_call_opened_on_one_replica_goes_to_the_socket_on_the_other(
    pair: tuple[Listening, Listening], keys: Keys
) -> None:
    a, b = pair
    async with app(b, keys) as one:
        await one.register()
        await _hears_taker(a, b)
        await open_call(a, keys)
        attached = await one.expect("call.attached.v1")
        assert (attached["call"], attached["why"]) == ("call_1", "new")
        asking = ask(a, keys)  # the worker asks on the replica the socket is not on
        asked = await one.expect("tool.call.v1")
        assert (asked["id"], asked["seq"]) == ("tc_1", 2)
        await one.send("tool.result.v1", call="call_1", id="tc_1", result="booked")
        assert (await one.expect("tool.result.ack.v1"))["duplicate"] is False
        assert (await asking)["result"] == "booked"
        # a retry of the worker's ask on the other replica is answered from the log
        again = await b.client.post(
            "/v1/calls/call_1/tools", json=TOOL, headers=bearer(keys.production)
        )
        assert again.json()["result"] == "booked"
        await one.nothing_queued()
    log = await kinds(a, keys)
    assert (log.count("tool.call"), log.count("tool.result")) == (1, 1)


async def test_a_socket_killed_hands_its_call_and_tool_to_a_socket_on_the_other_replica(
    pair: tuple[Listening, Listening], keys: Keys
) -> None:
    a, b = pair
    async with (
        app(a, keys, "app-a") as on_a,
        app(b, keys, "app-b") as on_b,
        app(a, keys, "console") as console,
    ):
        await console.register(takes_unclaimed=False)
        await on_a.register()
        await on_b.register()
        await _hears_taker(b, a)
        await open_call(b, keys)  # b's own socket takes it
        await on_b.expect("call.attached.v1")
        asking = ask(a, keys)
        await on_b.expect("tool.call.v1")
        on_b.kill()
        attached = await on_a.expect("call.attached.v1")
        assert (attached["call"], attached["why"], attached["claimed"]) == (
            "call_1",
            "handed",
            True,
        )
        assert (await on_a.expect("tool.call.v1"))["id"] == "tc_1"
        await on_a.send("tool.result.v1", call="call_1", id="tc_1", result=7)
        await on_a.expect("tool.result.ack.v1")
        assert (await asking)["result"] == 7
        await console.nothing_queued()
    log = await kinds(a, keys)
    assert (log.count("tool.call"), log.count("tool.result")) == (1, 1)


async def test_a_drained_call_goes_to_the_other_replica_and_its_running_tool_stays(
    pair: tuple[Listening, Listening], keys: Keys
) -> None:
    """Acceptance 3 across replicas: the drained call is handed to the socket on the other
    replica without the tool the draining socket runs; that socket killed unanswered, the tool
    reaches the call's holder on the other replica, once."""
    a, b = pair
    async with app(a, keys, "app-a") as on_a, app(b, keys, "app-b") as on_b:
        await on_a.register()
        await open_call(a, keys)
        await on_a.expect("call.attached.v1")
        await on_b.register()
        await _hears_taker(a, b)
        asking = ask(b, keys)
        asked = await on_a.expect("tool.call.v1")
        await on_a.send("agent.drain.v1")
        await on_a.expect("call.detached.v1")
        assert (await on_a.expect("agent.draining.v1"))["handed"] == 1
        assert (await on_b.expect("call.attached.v1"))["why"] == "handed"
        await on_b.nothing_queued()
        on_a.kill()
        again = await on_b.expect("tool.call.v1")
        assert (again["id"], again["deadline"]) == ("tc_1", asked["deadline"])
        await on_b.send("tool.result.v1", call="call_1", id="tc_1", result="seat 6")
        await on_b.expect("tool.result.ack.v1")
        assert (await asking)["result"] == "seat 6"
        await on_b.nothing_queued()
    log = await kinds(a, keys)
    assert (log.count("tool.call"), log.count("tool.result")) == (1, 1)


async def test_a_tool_a_replica_not_heard_was_running_goes_to_the_call_holder(
    pair: tuple[Listening, Listening], keys: Keys, database_url: str
) -> None:
    """A draining socket's replica killed while its socket ran a tool: once the replica is
    taken for dead, the tool reaches the socket holding the call."""
    a, _ = pair
    await open_call(a, keys)
    asking = ask(a, keys)
    await service(a).changes.wait_for(lambda: service(a).tools.waiting("call_1", "tc_1") == 1, 10)
    engine = db.create_engine(database_url, pool_size=1)
    try:
        async with engine.begin() as conn:
            await conn.execute(
                sa.insert(TOOL_HOLDS).values(
                    call_id="call_1", tool_id="tc_1", replica="killed.1", instance="app-x",
                    since=db.utcnow(),
                )
            )  # fmt: skip
    finally:
        await engine.dispose()
    async with app(a, keys) as one:
        assert await one.register() == 1
        assert (await one.expect("call.attached.v1"))["why"] == "parked"
        assert (await one.expect("tool.call.v1"))["id"] == "tc_1"  # at once, or once taken back
        await one.send("tool.result.v1", call="call_1", id="tc_1", result="seat 7")
        await one.expect("tool.result.ack.v1")
        assert (await asking)["result"] == "seat 7"
        await one.nothing_queued()


async def test_the_calls_of_a_replica_not_heard_are_taken_back_and_handed(
    pair: tuple[Listening, Listening], keys: Keys, database_url: str
) -> None:
    a, _ = pair
    await open_call(a, keys)  # nobody holds the agent: parked
    # a replica that was killed holding it: its hold stays, it is never heard again
    engine = db.create_engine(database_url, pool_size=1)
    try:
        async with engine.begin() as conn:
            await conn.execute(
                sa.insert(APP_HOLDS).values(
                    call_id="call_1", environment="production", org="org_acme",
                    agent="support-bot", replica="killed.1", instance="app-x",
                    since=db.utcnow(),
                )
            )  # fmt: skip
    finally:
        await engine.dispose()
    async with app(a, keys) as one:
        assert await one.register() == 0  # held by the dead replica, as far as the log says
        attached = await one.expect("call.attached.v1")
        assert (attached["call"], attached["why"], attached["claimed"]) == (
            "call_1",
            "handed",
            True,
        )


async def test_a_call_served_anew_is_attached_again_to_its_socket_on_any_replica(
    pair: tuple[Listening, Listening], keys: Keys
) -> None:
    """A written call's session taken up on another chat replica (issue 17): ``served`` asked of
    either replica makes the socket holding the call hear ``call.attached`` again, and no
    other socket takes it; nothing is written."""
    a, b = pair
    async with app(b, keys) as one, app(a, keys, instance="app-2") as two:
        await one.register()
        await _hears_taker(a, b)
        await open_call(a, keys, "call_1")
        first = await one.expect("call.attached.v1")
        assert (first["why"], first.get("again", False)) == ("new", False)
        before = await kinds(a, keys, "call_1")
        for replica in (a, b):  # asked where the socket is not, then where it is
            served = await replica.client.post(
                "/v1/calls/call_1/served", headers=bearer(keys.production)
            )
            assert served.status_code == 200, served.text
            assert served.json()["attached"] is True, served.text
            again = await one.expect("call.attached.v1")
            assert (again["call"], again["app"], again["again"]) == ("call_1", "app-1", True)
            assert (again["why"], again["claimed"]) == ("handed", True)
        assert await kinds(a, keys, "call_1") == before
        # another socket holding the agent is not handed it
        assert await two.register() == 0
        served = await a.client.post("/v1/calls/call_1/served", headers=bearer(keys.production))
        assert served.json()["attached"] is True
        assert (await one.expect("call.attached.v1"))["again"] is True
        await two.nothing_queued()
        await one.nothing_queued()


async def test_served_is_refused_for_an_unknown_call_another_environment_or_an_app_key(
    pair: tuple[Listening, Listening], keys: Keys
) -> None:
    a, _ = pair
    await open_call(a, keys, "call_1")
    for call, key, status in (
        ("call_nobody", keys.production, 404),
        ("call_1", keys.sandbox, 403),
        ("call_1", keys.app, 403),
        ("call_1", None, 401),
    ):
        r = await a.client.post(f"/v1/calls/{call}/served", headers=bearer(key) if key else {})
        assert (r.status_code, r.headers["content-type"]) == (status, "application/problem+json")
    # no socket holds the agent: nobody heard it, and it stays parked
    r = await a.client.post("/v1/calls/call_1/served", headers=bearer(keys.production))
    assert (r.status_code, r.json()["attached"]) == (200, False)
