"""A room's transitions as the store writes them on psycopg (issue 20, ``store/rooms.py``): each
one statement that changes the row and writes its journal line, the line's ``{call}`` and
``{worker}`` filled as ``str.format`` filled them, a room instance told by its sid (an empty sid
is none), and a repeat changing nothing."""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator

import pytest

from pinecall_dispatcher.store import Arrival, Store
from pinecall_dispatcher.store.offers import Claim
from pinecall_servicekit import db

NOW = dt.datetime(2026, 12, 4, 16, 0, tzinfo=dt.UTC)


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[Store]:
    engine = db.create_engine(database_url, pool_size=2)
    yield Store(engine)
    await engine.dispose()


def arrival(call: str, room: str, sid: str | None) -> Arrival:
    return Arrival(
        call=call, environment="production", fleet="pinecall", room=room, room_sid=sid,
        ring=f"AD_{call}", agent="support-bot", org="org_acme", caller="phone",
        caller_identity=f"sip_{call}", number="+15550100",
        context={"nested": {"ünïcode": ["ok", 1, None]}}, config={"voice": "x"},
    )  # fmt: skip


async def kept(store: Store, *arrivals: tuple[Arrival, Claim]) -> None:
    async with store.offers.fleet("pinecall", NOW) as tx:
        await tx.arrive(list(arrivals))


async def lines(store: Store, call: str) -> list[str]:
    return [line.line for line in (await store.views.journal(call)).lines]


async def test_an_arrival_keeps_its_context_and_its_claim_and_a_repeat_is_left_as_it_is(
    store: Store,
) -> None:
    a = arrival("call_a", "room-a", "RM_a")
    await kept(store, (a, Claim(line="offered", worker="pinecall/w.1")))
    await kept(store, (a, Claim(line="again", worker="pinecall/w.2")))
    row = await store.rooms.get("call_a")
    assert row is not None
    assert (row.state, row.tried, row.worker) == ("waiting", ["pinecall/w.1"], "pinecall/w.1")
    assert row.context == {"nested": {"ünïcode": ["ok", 1, None]}}
    assert row.arrived_at == NOW


async def test_a_room_finished_ends_its_instance_only_and_writes_one_line_each(
    store: Store,
) -> None:
    await kept(
        store,
        (arrival("call_old", "room-b", "RM_old"), Claim()),
        (arrival("call_new", "room-b", "RM_new"), Claim()),
    )
    ended = await store.rooms.finished(NOW, "production", "room-b", "RM_new")
    assert [(r.call, r.state, r.outcome) for r in ended] == [("call_new", "ended", "room_finished")]
    assert await lines(store, "call_new") == ["room call_new: the room ended"]
    assert await lines(store, "call_old") == []
    # delivered again: the row decides, nothing changes and no line is written twice
    assert await store.rooms.finished(NOW, "production", "room-b", "RM_new") == []
    assert await lines(store, "call_new") == ["room call_new: the room ended"]
    # an empty sid names no instance: every live row of the name ends
    assert [r.call for r in await store.rooms.finished(NOW, "production", "room-b", "")] == [
        "call_old"
    ]


async def test_an_agent_that_left_is_named_in_its_line_and_a_lost_one_leaves_none(
    store: Store,
) -> None:
    await kept(store, (arrival("call_c", "room-c", None), Claim(line="", worker="pinecall/w.3")))
    opened = await store.rooms.opened(NOW, "pinecall/w.3", call="call_c")
    assert [r.state for r in opened] == ["opened"]
    lost = await store.rooms.lost(NOW, "call_c", "pinecall/w.3", 7, "room {call}: {worker} gone")
    assert lost is not None
    assert (lost.state, lost.job, lost.written, lost.tried, lost.worker) == (
        "waiting", "sentence", 7, ["pinecall/w.3"], None,
    )  # fmt: skip
    # the line as str.format filled it: the worker of the row as it is now, None
    assert await lines(store, "call_c") == [
        "room call_c: opened by pinecall/w.3",
        "room call_c: None gone",
    ]
