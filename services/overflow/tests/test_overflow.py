"""The overflow answers the dispatcher's offers (issue 8, "The overflow"; acceptance 2's overflow
side): real livekit-agents AgentServer on the stand-in, SIP callers in lab rooms, the Cartesia
fake's voice, a call-log process on real Postgres and NATS."""

from __future__ import annotations

import asyncio

import httpx
from livekit import api
from livekit.plugins.cartesia.models import TTSDefaultVoiceId
from prometheus_client.parser import text_string_to_metric_families

from pinecall_loadlab.livekit import StandIn
from pinecall_loadlab.livekit import events as ev
from pinecall_loadlab.livekit.callers import sip_call
from pinecall_loadlab.livekit.testing import API_KEY, API_SECRET
from pinecall_loadlab.vendors import VendorFakes
from pinecall_overflow.server import Overflow
from pinecall_servicekit.testing.metrics import unregistered
from pinecall_testkit.call_log import Keys, Process, bearer

from .conftest import SAYS, Sealed, heard, job_offer, loud, offer_to, overflow_of, settings_for


async def test_an_answer_job_says_the_sentence_writes_the_call_back_ends_overflow_and_hangs_up(
    overflow: Overflow,
    standin: StandIn,
    livekit_api: api.LiveKitAPI,
    vendor_fakes: VendorFakes,
    call_log: Process,
    keys: Keys,
    sealed: Sealed,
) -> None:
    assert overflow.name == "pinecall/overflow"
    before = await answered(overflow)
    async with asyncio.timeout(90):
        # two phone callers the fleet had no seat for: one whose offer names the number, one
        # whose number only the SIP participant's sip.phoneNumber says
        callers = [
            await sip_call(
                livekit_api,
                standin.url,
                API_KEY,
                API_SECRET,
                room=room,
                fleet="pinecall",
                phone=phone,
            )
            for room, phone in (("room-1", "+15550101"), ("room-2", "+15550102"))
        ]
        await offer_to(
            livekit_api, overflow.name, job_offer("call_1", "room-1", number="+15550111")
        )
        await offer_to(livekit_api, overflow.name, job_offer("call_2", "room-2"))
        for caller in callers:
            await caller.closed.wait()  # hung up: the room was deleted
        ended = [await sealed.wait("call_1"), await sealed.wait("call_2")]
    for caller in callers:
        assert caller.removed_reason == "ROOM_DELETED"
        assert loud(heard(caller)), "the caller heard the overflow's voice"
    assert [e.outcome for e in ended] == ["overflow", "overflow"]
    assert [t.strip() for t in vendor_fakes.cartesia.transcripts].count(SAYS) == 2
    rooms = await livekit_api.room.list_rooms(api.ListRoomsRequest())
    assert [r.name for r in rooms.rooms] == []
    assert {e.room for e in standin.events.of(ev.RoomFinished)} == {"room-1", "room-2"}

    auth = bearer(keys.operator)
    async with httpx.AsyncClient(base_url=call_log.url, headers=auth) as http:
        for call in ("call_1", "call_2"):
            record = (await http.get(f"/v1/calls/{call}")).json()
            assert (record["state"], record["outcome"], record["worker"]) == (
                "sealed",
                "overflow",
                "pinecall/overflow",
            )
            log = (await http.get(f"/v1/calls/{call}/entries")).json()["entries"]
            assert [(e["kind"], e["counted"]) for e in log] == [
                ("call.started", None),
                ("call.sentence", 0),
                ("call.ended", None),
                ("call.sealed", None),
            ]
            assert log[1]["data"] == {"text": SAYS, "job": "answer"}
        agent_log = (
            await http.get("/v1/agents/support-bot/log", params={"environment": "production"})
        ).json()["entries"]
    callbacks = sorted((e["data"]["call"], e["data"]["number"]) for e in agent_log)
    assert [e["kind"] for e in agent_log] == ["callback.requested"] * 2
    assert callbacks == [("call_1", "+15550111"), ("call_2", "+15550102")]
    assert await answered(overflow) == before + 2


async def answered(overflow: Overflow) -> float:
    """``pinecall_overflow_calls_total`` of the overflow's fleet, its /metrics checked whole
    against the registry."""
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{overflow.health.port}") as http:
        text = (await http.get("/metrics")).text
    assert unregistered(text, "overflow") == []
    assert 'pinecall_overflow_registered{fleet="pinecall"} 1.0' in text
    (family,) = [
        f
        for f in text_string_to_metric_families(text)
        if f.name == "pinecall_overflow_calls" and f.type == "counter"
    ]
    return sum(s.value for s in family.samples)


async def test_the_sentence_is_said_in_the_voice_of_the_agent_rung(
    overflow: Overflow,
    livekit_api: api.LiveKitAPI,
    standin: StandIn,
    vendor_fakes: VendorFakes,
    call_log: Process,
    keys: Keys,
    sealed: Sealed,
) -> None:
    """The agent's definition is read with the overflow's fleet key: its voice speaks the
    sentence; an agent with no definition (or no voice of its own) gets the overflow's."""
    definition = {"name": "support-bot", "prompt": "Acme's bistro.", "voice": "acme-voice"}
    async with httpx.AsyncClient(base_url=call_log.url) as http:
        put = await http.put(
            "/v1/agents/support-bot", json=definition, params={"org": "org_acme"},
            headers=bearer(keys.app),
        )  # fmt: skip
        assert put.status_code == 200, put.text
    async with asyncio.timeout(90):
        for room, agent in (("room-v1", "support-bot"), ("room-v2", "sales-bot")):
            caller = await sip_call(
                livekit_api, standin.url, API_KEY, API_SECRET, room=room, fleet="pinecall"
            )
            await offer_to(livekit_api, overflow.name, job_offer(room, room, agent=agent))
            await caller.closed.wait()
            await sealed.wait(room)
    assert vendor_fakes.cartesia.voices == ["acme-voice", TTSDefaultVoiceId]


async def test_the_health_port_answers_ready_once_livekit_registered_it(overflow: Overflow) -> None:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{overflow.health.port}") as http:
        assert (await http.get("/healthz")).status_code == 200
        assert (await http.get("/readyz")).status_code == 200
        assert (await http.get("/")).text == "ready"
    overflow.registered.clear()  # as before the registration
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{overflow.health.port}") as http:
        assert (await http.get("/healthz")).text == "ok"  # alive: not restarted for LiveKit
        not_ready = await http.get("/readyz")
        assert (not_ready.status_code, not_ready.text) == (503, "not registered with LiveKit yet")


async def test_a_call_log_that_does_not_answer_does_not_keep_the_caller_in_silence(
    standin: StandIn, livekit_api: api.LiveKitAPI, vendor_fakes: VendorFakes, keys: Keys
) -> None:
    """Nothing answers at the call log's address: the open is retried for its 10 s, then the
    sentence is said anyway and the caller hung up; the call is the reaper's."""
    settings = settings_for(standin, vendor_fakes, keys, "http://127.0.0.1:9")
    async with overflow_of(settings) as overflow, asyncio.timeout(90):
        caller = await sip_call(
            livekit_api, standin.url, API_KEY, API_SECRET, room="room-3", fleet="pinecall"
        )
        await offer_to(livekit_api, overflow.name, job_offer("call_3", "room-3"))
        await caller.closed.wait()
    assert caller.removed_reason == "ROOM_DELETED"
    assert loud(heard(caller))
