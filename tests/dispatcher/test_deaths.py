"""The death handler in its chain (issue 8; seed 000, "A worker that dies"): an agent whose
connection is lost with its call open (or ended failed by its worker when its job's process died)
and its caller there gets the call ended drained, a call back and the sentence, offered like any
call but never to the lost worker; a fleet nobody else is heard from waits for a worker. The workers are lab workers (THREAD) and the call is written on
call-log by the test as a worker writes it; the real processes, their SIGKILL and SIGSTOP are
``loadlab/tests/test_death.py``. LiveKit's connection timeout is shortened to 0.5 s."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator

import httpx
import pytest
from livekit import api
from livekit.protocol import models

from pinecall_clients.calllog import CallLogClient
from pinecall_contracts.base import decode
from pinecall_contracts.calls import CallOpen
from pinecall_contracts.dispatch import JobOffer
from pinecall_loadlab.livekit import StandIn, StandInConfig
from pinecall_loadlab.livekit import events as ev
from pinecall_loadlab.scenarios.chain import Chain, ChainConfig, runtime_chain
from pinecall_loadlab.scenarios.labworkers import LabWorker
from pinecall_loadlab.scenarios.runtime_choosing import place_calls
from pinecall_servicekit.testing.apps import Replica
from pinecall_testkit.call_log import Keys, bearer

AGENT = models.ParticipantInfo.Kind.AGENT


@pytest.fixture
async def chain(
    standin: StandIn, chain_config: ChainConfig, call_log: Replica
) -> AsyncIterator[Chain]:
    """The chain with call-log: the death handler reads, ends and calls back through it."""
    async with runtime_chain(standin, chain_config, call_log=call_log) as c:
        yield c


@pytest.fixture
def standin_config(standin_config: StandInConfig) -> StandInConfig:
    return dataclasses.replace(standin_config, connection_timeout_s=0.5)


@pytest.fixture
async def log(chain: Chain, keys: Keys) -> AsyncIterator[CallLogClient]:
    """call-log as a worker of the production fleet reaches it."""
    assert chain.call_log is not None
    transport = httpx.ASGITransport(app=chain.call_log.app)  # type: ignore[arg-type]
    async with CallLogClient("http://call-log.lab", keys.production, transport=transport) as c:
        yield c


async def answered(chain: Chain, prefix: str, by: LabWorker, log: CallLogClient) -> JobOffer:
    """One SIP call answered by ``by``, opened on call-log naming it, three entries written."""
    [call], _ = await place_calls(chain, prefix=prefix, calls=1, settle_each=True)
    assert call.by == by.name
    [created] = chain.lk.events.of(ev.DispatchCreated, lambda e: e.room == call.room)
    offer = decode(created.metadata, JobOffer)
    await log.open(
        CallOpen(
            call=offer.call,
            agent=offer.agent,
            org=offer.org,
            environment=offer.environment,
            room=offer.room,
            worker=by.name,
        )
    )
    writer = log.writer(offer.call)
    for n in range(3):
        writer.add("turn.user", {"text": f"line {n}"})
    await writer.drain()
    return offer


async def lose_agent(chain: Chain, room: str) -> None:
    """Cut the agent's connection without a goodbye; until the dispatcher applied its
    ``participant_left`` (CONNECTION_TIMEOUT)."""
    people = await chain.livekit.room.list_participants(api.ListParticipantsRequest(room=room))
    [agent] = [p for p in people.participants if p.kind == AGENT]
    chain.lk.cut(room, agent.identity)
    await chain.handled(room, "participant_left", "AGENT")


def sentences(chain: Chain, room: str) -> list[tuple[str, JobOffer]]:
    return [
        (d.agent_name, decode(d.metadata, JobOffer))
        for d in chain.lk.events.of(ev.DispatchCreated, lambda e: e.room == room)
        if decode(d.metadata, JobOffer).job == "sentence"
    ]


async def test_a_lost_agent_gets_its_call_ended_drained_a_call_back_and_the_sentence_once(
    chain: Chain, log: CallLogClient, keys: Keys
) -> None:
    dead = await chain.worker("dead", seats=8)  # the most seats free: every first offer
    other = await chain.worker("other", seats=4)
    async with asyncio.timeout(60):
        offer = await answered(chain, "lost", dead, log)
        await lose_agent(chain, offer.room)
        [(to, sentence)] = sentences(chain, offer.room)
        await chain.lk.events.wait_for(
            ev.ParticipantJoined, lambda e: e.room == offer.room and e.kind == AGENT, count=2
        )
        # the sentence job's join (the second agent's), not the dead job's, applied
        await chain.handled(offer.room, "participant_joined", "AGENT", count=2)
    # never to the lost worker, though it is still heard and has the most seats free
    assert to == other.name
    assert (sentence.call, sentence.attempt, sentence.written) == (offer.call, 2, 3)
    assert (sentence.number, sentence.agent) == ("+1555000000", "lab-agent")
    record = await log.record(offer.call)
    assert (record.state, record.outcome, record.cause) == ("ended", "drained", "lost_agent")
    assert chain.call_log is not None
    r = await chain.call_log.get(
        "/v1/agents/lab-agent/log",
        params={"environment": "production"},
        headers=bearer(keys.operator),
    )
    [callback] = r.json()["entries"]
    assert callback["kind"] == "callback.requested"
    assert callback["data"]["number"] == "+1555000000"
    assert callback["data"]["call"] == offer.call
    row = await chain.service.store.rooms.get(offer.call)
    assert row is not None
    assert (row.state, row.job, row.worker, row.written) == ("opened", "sentence", other.name, 3)
    lines = [x.line for x in (await chain.service.store.views.journal(offer.call)).lines]
    assert (
        f"room {offer.call}: agent of {dead.name} lost (CONNECTION_TIMEOUT): ended drained, "
        f"a call back for +1555000000, sentence offered to {other.name}"
    ) in lines
    # the same webhook again (a redelivery, a second replica): the row decides, nothing more
    [left] = [
        e
        for e in chain.service.placing.handled
        if e.room == offer.room and e.event == "participant_left"
    ]
    await chain.service.placing.livekit_event(left)
    assert len(sentences(chain, offer.room)) == 1
    assert len((await chain.service.store.views.journal(offer.call)).lines) == len(lines)


async def test_a_dead_jobs_call_gets_the_sentence_from_the_next_worker_heard(
    chain: Chain, log: CallLogClient
) -> None:
    """A job's process dead: its worker ends the call ``failed`` and leaves it unsealed, then
    LiveKit says the agent lost; the caller still gets the sentence (the outcome stays
    ``failed``). A fleet of one worker whose agent was lost is not full: not the overflow, past
    the fleet's wait of a new ring; the sentence goes to the next worker heard."""
    only = await chain.worker("only", seats=4)
    await chain.overflow()
    async with asyncio.timeout(60):
        offer = await answered(chain, "alone", only, log)
        await log.end(offer.call, "failed", "the job's process exited with code -9")
        await lose_agent(chain, offer.room)
        row = await chain.service.store.rooms.get(offer.call)
        assert row is not None
        assert (row.state, row.job, row.worker) == ("waiting", "sentence", None)
        # past the time a new ring of a fleet nobody heard waits before the overflow
        await asyncio.sleep(chain.service.settings.fleet_wait_s)  # time passing is the point
        await chain.service.sweep()
        assert sentences(chain, offer.room) == []
        back = await chain.worker("back", seats=4)
        await chain.service.sweep()
        [(to, sentence)] = sentences(chain, offer.room)
    assert to == back.name
    assert sentence.written == 3
    assert (await log.record(offer.call)).outcome == "failed"
    lines = [x.line for x in (await chain.service.store.views.journal(offer.call)).lines]
    assert (
        f"room {offer.call}: agent of {only.name} lost (CONNECTION_TIMEOUT): already ended "
        f"(failed), a call back for +1555000000, sentence waits for a worker of pinecall to be "
        f"heard"
    ) in lines
