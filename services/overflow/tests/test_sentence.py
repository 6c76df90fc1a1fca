"""The sentence job (issue 8, "A worker that dies"; the job the overflow and the worker share):
it follows on from the dead worker's count with no gap, deletes the room and seals the call; and
the overflow drains on SIGTERM with a sentence in flight."""

from __future__ import annotations

import asyncio

import httpx
import psycopg
from livekit import api

from pinecall_clients.calllog import CallLogClient
from pinecall_contracts.calls import CallOpen
from pinecall_contracts.dispatch import JobOffer
from pinecall_loadlab.livekit import StandIn
from pinecall_loadlab.livekit import events as ev
from pinecall_loadlab.livekit.callers import sip_call
from pinecall_loadlab.livekit.testing import API_KEY, API_SECRET
from pinecall_overflow.server import Overflow
from pinecall_servicekit.lifecycle import ExitCode
from pinecall_testkit.call_log import Keys, Process, bearer, opening

from .conftest import SAYS, Sealed, heard, job_offer, loud, offer_to

DEAD = "pinecall/worker-a.1791067258"


async def dead_workers_call(
    call_log: Process, keys: Keys, call: str, room: str, n: int, *, ended: bool = True
) -> None:
    """A call a worker opened and wrote ``n`` entries on, then died; the death handler ended it
    ``drained`` (seed 000, "A worker that dies"), or, with ``ended`` False, its end did not
    reach the log (then the sentence job ends it)."""
    async with CallLogClient(call_log.url, keys.production) as log:
        await log.open(CallOpen(**(opening(call, room=room, worker=DEAD))))  # type: ignore[arg-type]
        writer = log.writer(call)
        for i in range(n):
            writer.add("transcript.user", {"n": i})
        await writer.drain()
        assert writer.written == n
        if ended:
            await log.end(call, "drained", reason="its worker died", cause="lost_agent")


async def test_a_sentence_follows_on_from_the_dead_workers_count_deletes_the_room_and_seals(
    overflow: Overflow,
    standin: StandIn,
    livekit_api: api.LiveKitAPI,
    call_log: Process,
    keys: Keys,
    sealed: Sealed,
) -> None:
    async with asyncio.timeout(90):
        await dead_workers_call(call_log, keys, "call_d", "room-d", 3)
        await dead_workers_call(call_log, keys, "call_e", "room-e", 2, ended=False)
        callers = [
            await sip_call(
                livekit_api, standin.url, API_KEY, API_SECRET, room=room, fleet="pinecall"
            )
            for room in ("room-d", "room-e")
        ]
        # room-d's offer carries the log's count; room-e's is stale (1, the log took 2)
        await offer_to(livekit_api, overflow.name, sentence("call_d", "room-d", written=3))
        await offer_to(livekit_api, overflow.name, sentence("call_e", "room-e", written=1))
        for caller in callers:
            await caller.closed.wait()
        await sealed.wait("call_d")
        await sealed.wait("call_e")
    for caller in callers:
        assert caller.removed_reason == "ROOM_DELETED"
        assert loud(heard(caller))
    assert {e.room for e in standin.events.of(ev.RoomFinished)} == {"room-d", "room-e"}
    async with httpx.AsyncClient(base_url=call_log.url, headers=bearer(keys.operator)) as http:
        for call, n in (("call_d", 3), ("call_e", 2)):
            record = (await http.get(f"/v1/calls/{call}")).json()
            assert (record["state"], record["outcome"], record["worker"], record["written"]) == (
                "sealed",
                "drained",
                DEAD,
                n + 1,
            )
            # call_d ended by the death handler, call_e by its sentence job: a lost agent's both
            assert record["cause"] == "lost_agent"
            log = (await http.get(f"/v1/calls/{call}/entries")).json()["entries"]
            counted = [e for e in log if e["counted"] is not None]
            assert [e["counted"] for e in counted] == list(range(n + 1)), "no gap, nothing twice"
            assert counted[-1]["kind"] == "call.sentence"
            assert counted[-1]["data"] == {"text": SAYS, "job": "sentence"}
            assert log[-1]["kind"] == "call.sealed"
            assert [e["kind"] for e in log].count("call.ended") == 1  # whichever came first
        # the sentence job writes no call back: that is the death handler's (a phone caller's)
        production = {"environment": "production"}
        agent_log = await http.get("/v1/agents/support-bot/log", params=production)
        assert agent_log.json()["entries"] == []


def sentence(call: str, room: str, *, written: int) -> JobOffer:
    return job_offer(call, room, job="sentence", written=written)


async def test_sigterm_drains_the_sentence_in_flight_and_takes_no_new_job(
    overflow: Overflow,
    standin: StandIn,
    livekit_api: api.LiveKitAPI,
    call_log: Process,
    keys: Keys,
    sealed: Sealed,
    database_url: str,
) -> None:
    async with asyncio.timeout(90):
        await dead_workers_call(call_log, keys, "call_t", "room-t", 1)
        caller = await sip_call(
            livekit_api, standin.url, API_KEY, API_SECRET, room="room-t", fleet="pinecall"
        )
        async with await psycopg.AsyncConnection.connect(database_url) as held:
            # hold the call's head: the job cannot write its sentence until this lets go
            await held.execute("SELECT 1 FROM calllog.calls WHERE call_id = 'call_t' FOR UPDATE")
            await offer_to(livekit_api, overflow.name, sentence("call_t", "room-t", written=1))
            while not (await caller.audio.get()).sender.startswith("agent-"):
                pass  # the sentence is playing: the job is in flight
            overflow.stop()  # what SIGTERM does
            await offer_to(livekit_api, overflow.name, job_offer("call_u", "room-u"))
            [refused] = await standin.events.wait_for(
                ev.JobRequestEnded, lambda e: e.room == "room-u"
            )
            assert refused.outcome != "assigned"
            assert overflow.active == 1
            assert not overflow.exit.done()  # type: ignore[attr-defined]
        assert await overflow.exit == ExitCode.OK  # type: ignore[attr-defined]
        assert (await sealed.wait("call_t")).outcome == "drained"
        await caller.closed.wait()
    assert caller.removed_reason == "ROOM_DELETED"
