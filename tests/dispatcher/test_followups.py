"""Follow-ups, dialled (issue 18, "Call backs, dialled"; seed 003): every call back on call-log
becomes a follow-up the dispatcher dials as an outbound call of its agent when the fleet has a
seat free; the line not ready defers it an hour, not burnt; a callee not reached is tried again
later, and given up after the last try; each try once whatever replica or restart; each try and
its outcome on the agent's log.

The chain is real (roster, webhook-ingest, dispatcher replicas, call-log, the stand-in, lab
workers' heartbeats); the dial is the dialler's seam (:class:`followups.dialler.Dial`), here a
recorder that answers a call id as the outbound endpoint does; the clock is the dialler's, moved
by the test. The background round is an hour apart here, so each round is the test's own.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
from collections.abc import AsyncIterator
from typing import Any

import pytest
from livekit import api

from pinecall_contracts.calls import CallbackRequest
from pinecall_dispatcher.admission import FleetFull
from pinecall_dispatcher.followups.dialler import DialOrder
from pinecall_dispatcher.service import DispatcherService
from pinecall_loadlab.livekit import StandIn
from pinecall_loadlab.livekit.callers import LAB_AGENT, LAB_ORG
from pinecall_loadlab.scenarios.chain import Chain, ChainConfig, chain_call_log, runtime_chain
from pinecall_servicekit.db import utcnow
from pinecall_servicekit.errors import PinecallError
from pinecall_servicekit.testing.apps import Replica
from pinecall_testkit.call_log import Keys, bearer

from .conftest import SHORT

HOUR = 3600.0


@pytest.fixture
def dispatcher_numbers() -> dict[str, Any]:
    return SHORT | {"followup_every_s": HOUR, "followup_retry_s": 600.0}


class Clock:
    """The dialler's clock, moved by the test."""

    def __init__(self) -> None:
        self.now = dt.datetime.now(dt.UTC)

    def __call__(self) -> dt.datetime:
        return self.now

    def move(self, seconds: float) -> None:
        self.now += dt.timedelta(seconds=seconds)


@dataclasses.dataclass
class Dialled:
    """The outbound seam's stand-in: each order kept; ``refuse`` raised instead while set."""

    orders: list[DialOrder] = dataclasses.field(default_factory=list)
    refuse: PinecallError | None = None

    async def __call__(self, order: DialOrder) -> str:
        await asyncio.sleep(0)  # another replica's round may run meanwhile, as over HTTP
        if self.refuse is not None:
            raise self.refuse
        self.orders.append(order)
        return f"call_{order.key}"

    def keys(self) -> list[str]:
        return [o.key for o in self.orders]


def drive(services: list[DispatcherService], clock: Clock, dial: Dialled) -> None:
    for service in services:
        service.dialler.clock = clock
        service.dialler.dial = dial


@pytest.fixture
async def chain(
    standin: StandIn, chain_config: ChainConfig, call_log: Replica
) -> AsyncIterator[Chain]:
    async with runtime_chain(standin, chain_config, call_log=call_log, dispatchers=2) as c:
        yield c


def services(chain: Chain) -> list[DispatcherService]:
    return [r.app.state.dispatcher for r in chain.dispatchers]


async def seated(chain: Chain, seats: int) -> None:
    """A worker of ``seats`` heard, and every replica's rows read after its heartbeat reached
    the roster (its fan-out heard), so each replica's line counts its seats."""
    worker = await chain.pretend("w", seats=seats, load=lambda _s: 0.0)
    for s in services(chain):
        await s.roster.said.wait_for(lambda s=s: s.roster.newest(worker) is not None, 30)
        await s.roster.refresh()


async def ask(log: Replica, keys: Keys, number: str, call: str | None = None) -> int:
    """A call back asked as the overflow asks it (its fleet key); its seq on the agent's log."""
    body = {"agent": LAB_AGENT, "number": number, "reason": "the fleet was full"}
    r = await log.post(
        "/v1/callbacks",
        json=body | ({"call": call} if call else {}),
        headers=bearer(keys.production),
    )
    assert r.status_code == 200, r.text
    return int(r.json()["seq"])


async def agent_log(log: Replica, keys: Keys) -> list[tuple[str, dict[str, Any]]]:
    r = await log.get(
        f"/v1/agents/{LAB_AGENT}/log",
        params={"environment": "production"},
        headers=bearer(keys.operator),
    )
    assert r.status_code == 200, r.text
    return [
        (e["kind"], e["data"]) for e in r.json()["entries"] if e["kind"].startswith("callback.")
    ]


async def test_the_line_not_ready_defers_an_hour_unburnt_then_one_dial_answered(
    chain: Chain, call_log: Replica, keys: Keys
) -> None:
    clock, dial = Clock(), Dialled()
    drive(services(chain), clock, dial)
    dialler = chain.service.dialler
    seq = await ask(call_log, keys, "+15550100", call="call_full_1")
    await dialler.tick()  # no worker heard in 90 s: the line is not ready
    [(_, deferred)] = [e for e in await agent_log(call_log, keys) if e[0] == "callback.deferred"]
    assert (deferred["callback"], deferred["reason"]) == (seq, "not_ready")
    assert dt.datetime.fromisoformat(deferred["until"]) == clock.now + dt.timedelta(hours=1)
    await seated(chain, 2)
    await dialler.tick()
    clock.move(HOUR - 1)
    await dialler.tick()
    assert dial.orders == []  # a seat now, but not an hour yet
    clock.move(1)
    await asyncio.gather(*(s.dialler.tick() for s in services(chain)))
    await dialler.tick()
    [order] = dial.orders  # dialled once, by one replica
    assert (order.key, order.environment, order.org, order.agent, order.to) == (
        "followup-1-1",
        "production",
        LAB_ORG,
        LAB_AGENT,
        "+15550100",
    )
    assert order.context["callback"] == seq
    await dialler.ended(f"call_{order.key}", "completed")
    await dialler.ended(f"call_{order.key}", "completed")  # heard twice: applied once
    assert [k for k, _ in await agent_log(call_log, keys)] == [
        "callback.requested",
        "callback.deferred",
        "callback.dialled",
        "callback.answered",
    ]
    [fleet] = (await chain.service.offers()).fleets
    assert (fleet.followups, fleet.tries, fleet.not_reached) == (0, 1, 0)


async def test_a_callee_not_reached_is_tried_again_later_then_given_up(
    chain: Chain, call_log: Replica, keys: Keys
) -> None:
    clock, dial = Clock(), Dialled()
    drive(services(chain), clock, dial)
    dialler = chain.service.dialler
    await seated(chain, 2)
    await ask(call_log, keys, "+15550101")
    for attempt in (1, 2, 3):
        await dialler.tick()
        assert dial.keys()[-1] == f"followup-1-{attempt}"
        await dialler.ended(f"call_followup-1-{attempt}", "not_reached", "486 Busy Here")
        await dialler.tick()
        assert len(dial.orders) == attempt  # not again before retry_s
        clock.move(600)
    await dialler.tick()
    assert len(dial.orders) == 3  # given up: never dialled again
    kinds = await agent_log(call_log, keys)
    assert [k for k, _ in kinds] == [
        "callback.requested",
        *["callback.dialled", "callback.not_reached"] * 3,
        "callback.given_up",
    ]
    assert kinds[2][1]["status"] == "486 Busy Here"
    assert (kinds[-1][1]["reason"], kinds[-1][1]["tries"]) == ("not_reached", 3)
    [fleet] = (await chain.service.offers()).fleets
    assert (fleet.followups, fleet.tries, fleet.not_reached) == (0, 3, 3)


async def test_a_dial_refused_for_want_of_a_seat_is_not_burnt_and_a_full_fleet_waits(
    chain: Chain, call_log: Replica, keys: Keys
) -> None:
    clock, dial = Clock(), Dialled(refuse=FleetFull("no worker of pinecall has a seat free"))
    drive(services(chain), clock, dial)
    dialler = chain.service.dialler
    await seated(chain, 1)
    await ask(call_log, keys, "+15550102")
    await dialler.tick()  # the dial refused: the line was not ready, an hour later, unburnt
    dial.refuse = None
    clock.move(HOUR)
    await dialler.tick()
    assert dial.keys() == ["followup-1-2"]  # the second try, the first never counted
    await dialler.ended("call_followup-1-2", "not_reached")
    clock.move(600)
    await dialler.tick()
    await dialler.ended("call_followup-1-3", "not_reached")
    clock.move(600)
    await dialler.tick()
    assert dial.keys() == ["followup-1-2", "followup-1-3", "followup-1-4"]  # three burnt
    kinds = [k for k, _ in await agent_log(call_log, keys)]
    assert kinds[:3] == ["callback.requested", "callback.deferred", "callback.dialled"]


async def test_two_replicas_never_dial_one_try_twice(
    chain: Chain, call_log: Replica, keys: Keys
) -> None:
    clock, dial = Clock(), Dialled()
    both = services(chain)
    drive(both, clock, dial)
    await seated(chain, 40)
    for n in range(12):
        await ask(call_log, keys, f"+1555020{n:02d}")
    for _ in range(3):
        await asyncio.gather(*(s.dialler.tick() for s in both for _ in range(2)))
    tries = dial.keys()
    assert len(tries) == len(set(tries)) == 12  # every follow-up dialled, each once
    assert all(key.endswith("-1") for key in tries)  # one try each
    # the claim itself: rounds of both replicas at once never take one follow-up twice
    for n in range(12):
        await ask(call_log, keys, f"+1555030{n:02d}")
    await both[0].dialler.take()
    claimed = await asyncio.gather(
        *(s.store.followups.claim("production", clock(), 3, s.dialler.replica) for s in both * 4)
    )
    ids = [f.id for batch in claimed for f in batch]
    assert len(ids) == len(set(ids)) == 12  # each once, none lost
    # a replica that claimed and died before its dial: its try is dialled by another, same key
    dial.orders.clear()
    clock.move(both[1].dialler.stale_s)
    await both[1].dialler.tick()
    assert sorted(dial.keys()) == sorted(f"followup-{n}-1" for n in ids)


async def test_a_follow_up_survives_a_restart_of_every_service(
    standin: StandIn, chain_config: ChainConfig, keys: Keys
) -> None:
    clock, dial = Clock(), Dialled()
    async with (
        chain_call_log(chain_config) as log,
        runtime_chain(standin, chain_config, call_log=log) as first,
    ):
        drive(services(first), clock, dial)
        await ask(log, keys, "+15550104")
        await first.service.dialler.tick()  # no worker: deferred an hour
    # every service anew on the same Postgres and NATS: call-log, roster, ingest, dispatcher
    async with (
        chain_call_log(chain_config) as log,
        runtime_chain(standin, chain_config, call_log=log, dispatchers=2) as second,
    ):
        drive(services(second), clock, dial)
        await seated(second, 2)
        await second.service.dialler.tick()
        assert dial.orders == []  # still deferred
        clock.move(HOUR)
        for _ in range(2):
            await asyncio.gather(*(s.dialler.tick() for s in services(second)))
        assert dial.keys() == ["followup-1-1"]
        assert [k for k, _ in await agent_log(log, keys)] == [
            "callback.requested",
            "callback.deferred",
            "callback.dialled",
        ]


async def test_a_try_is_placed_as_an_outbound_call_once_whatever_it_is_asked_again(
    chain: Chain, call_log: Replica, keys: Keys
) -> None:
    """The dialler's own dial (``place_outbound``), on the stand-in: no outbound trunk is the
    line not ready (an hour, unburnt); a number that is not E.164 is given up; with a trunk the
    try is an outbound call, and the same try placed again is the same call. (call-log refuses a
    call back to a number not E.164 now; the dialler still gives up the rows it once took.)"""
    clock = Clock()
    for s in services(chain):
        s.dialler.clock = clock
    dialler = chain.service.dialler
    await seated(chain, 2)
    # a number heard without its +, as call-log took it before refusing non-E.164 numbers
    # (rows of an older call-log; written through its store, which takes it as named)
    legacy = CallbackRequest(agent=LAB_AGENT, number="15550105", reason="the fleet was full")
    await call_log.app.state.call_log.store.agents.callback("production", legacy, utcnow())
    await ask(call_log, keys, "+14155550106")
    await dialler.tick()
    log = await agent_log(call_log, keys)
    given_up = [d for k, d in log if k == "callback.given_up"]
    deferred = [d for k, d in log if k == "callback.deferred"]
    assert [d["reason"] for d in given_up] == ["not_e164"]
    assert [d["reason"] for d in deferred] == ["no_outbound_trunk"]
    trunk = api.SIPOutboundTrunkInfo(
        name="pinecall-outbound", address="sip.test.invalid", numbers=["+15550000000"]
    )
    await chain.livekit.sip.create_outbound_trunk(api.CreateSIPOutboundTrunkRequest(trunk=trunk))
    clock.move(HOUR)
    await dialler.tick()
    [dialled] = [d for k, d in await agent_log(call_log, keys) if k == "callback.dialled"]
    assert (dialled["number"], dialled["try"]) == ("+14155550106", 2)
    key = dialled["key"]
    again = DialOrder(
        key=key,
        environment="production",
        org=LAB_ORG,
        agent=LAB_AGENT,
        to="+14155550106",
        context={
            "followup": int(key.split("-")[1]),
            "try": 2,
            "callback": dialled["callback"],
            "reason": "the fleet was full",
        },
    )
    assert await services(chain)[1].place_followup(again) == dialled["call"]  # one call


async def write_try_not_reached(log: Replica, keys: Keys, call: str) -> None:
    """The try's call as its worker writes it when the phone was busy: opened, ``call.dialled``
    not answered with LiveKit SIP's status, ended ``not_reached`` with it as the reason."""
    fleet = bearer(keys.production)
    opened = await log.post(
        "/v1/calls",
        json={
            "call": call,
            "agent": LAB_AGENT,
            "org": LAB_ORG,
            "environment": "production",
            "room": f"out-{call}",
            "worker": "pinecall/w.1",
        },
        headers=fleet,
    )
    assert opened.status_code == 200, opened.text
    dialled = {
        "to": "+15550107",
        "answered": False,
        "sip_status_code": 486,
        "sip_status": "Busy Here",
        "trunk": "ST_1",
        "participant": f"phone-{call}",
    }
    batch = {"after": 0, "entries": [{"kind": "call.dialled", "ts": dt.datetime.now(dt.UTC).isoformat(), "data": dialled}]}  # fmt: skip
    written = await log.post(f"/v1/calls/{call}/entries", json=batch, headers=fleet)
    assert written.status_code == 200, written.text
    end = {"outcome": "not_reached", "reason": "SIP 486 Busy Here"}
    ended = await log.post(f"/v1/calls/{call}/end", json=end, headers=fleet)
    assert ended.status_code == 200, ended.text


async def test_a_try_not_reached_carries_its_legs_sip_status_from_its_calls_log(
    chain: Chain, call_log: Replica, keys: Keys
) -> None:
    """``call.ended`` says only the outcome: the dialler reads the try's call's log for LiveKit
    SIP's status (``call.dialled``) and the end's reason, as the call's own log says them."""
    clock, dial = Clock(), Dialled()
    drive(services(chain), clock, dial)
    dialler = chain.service.dialler
    await seated(chain, 2)
    await ask(call_log, keys, "+15550107")
    await dialler.tick()
    [order] = dial.orders
    call = f"call_{order.key}"
    await write_try_not_reached(call_log, keys, call)
    await dialler.ended(call, "not_reached")  # as the dispatcher hears it on NATS
    # the /end above was heard on NATS by both replicas too: the first to apply the outcome owes
    # the entry and may still be sending it when this call finds it applied; a flush sends what
    # is owed (call-log writes it once, by its key) or finds it written
    await dialler.flush()
    [not_reached] = [d for k, d in await agent_log(call_log, keys) if k == "callback.not_reached"]
    assert not_reached == {
        "callback": not_reached["callback"],
        "try": 1,
        "call": call,
        "status": "SIP 486 Busy Here",
        "sip_status_code": 486,
        "sip_status": "Busy Here",
    }


class Crash(BaseException):
    """The replica's process dies here: nothing after it runs (not an error it handles)."""


async def test_each_entry_of_a_try_is_written_once_whatever_dies_between_the_change_and_the_log(
    chain: Chain, call_log: Replica, keys: Keys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A replica dies after a try's change committed and before call-log heard of it: the next
    round of another replica writes the entry; one dies after call-log wrote an entry and before
    it knew: the entry is sent again, and written once (its key)."""
    clock, dial = Clock(), Dialled()
    first, second = (s.dialler for s in services(chain))
    drive(services(chain), clock, dial)
    await seated(chain, 2)
    await ask(call_log, keys, "+15550108")

    async def dies(*_: object, **__: object) -> None:
        raise Crash

    # the first dies between the try's dial (committed) and its callback.dialled on the log
    monkeypatch.setattr(first.call_log, "agent_entry", dies)
    with pytest.raises(Crash):
        await first.tick()
    assert dial.keys() == ["followup-1-1"]
    assert [k for k, _ in await agent_log(call_log, keys)] == ["callback.requested"]
    await second.tick()  # the entry owed is written, and the try is not dialled again
    assert dial.keys() == ["followup-1-1"]
    assert [k for k, _ in await agent_log(call_log, keys)] == [
        "callback.requested",
        "callback.dialled",
    ]
    # the second dies between call-log writing callback.not_reached and marking it written
    monkeypatch.setattr(second.store.notes, "written", dies)
    call = "call_followup-1-1"
    with pytest.raises(Crash):
        await second.ended(call, "not_reached", "SIP 486 Busy Here")
    monkeypatch.undo()
    await first.tick()  # sent again: call-log answers the first, writing nothing
    await second.tick()
    log = await agent_log(call_log, keys)
    assert [k for k, _ in log] == [
        "callback.requested",
        "callback.dialled",
        "callback.not_reached",
    ]
    assert log[2][1]["status"] == "SIP 486 Busy Here"
    assert await first.store.notes.owed() == []
