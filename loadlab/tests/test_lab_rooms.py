"""Acceptance 6: lab rooms carry audio both ways and turn presence into LiveKit's webhooks."""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator

import aiohttp
import pytest
from livekit import api, rtc
from livekit.agents import Agent, AgentSession, stt

from pinecall_labroom import FRAME_SAMPLES, SAMPLE_RATE, JoinError, LabRoom
from pinecall_labroom.agents import wire_session
from pinecall_labroom.client import lab_url
from pinecall_loadlab.livekit import StandIn, StandInConfig
from pinecall_loadlab.livekit import events as ev
from pinecall_loadlab.livekit.callers import agent_token, caller_token, sip_call
from pinecall_loadlab.livekit.testing import API_KEY, API_SECRET, WebhookSink

receiver = api.WebhookReceiver(api.TokenVerifier(API_KEY, API_SECRET))
Reason = api.DisconnectReason


def tone(frames: int, hz: float = 440.0) -> list[bytes]:
    """`frames` 20 ms frames of a sine, s16le mono 48 kHz."""
    out = []
    for f in range(frames):
        samples = (
            int(8000 * math.sin(2 * math.pi * hz * (f * FRAME_SAMPLES + i) / SAMPLE_RATE))
            for i in range(FRAME_SAMPLES)
        )
        out.append(b"".join(s.to_bytes(2, "little", signed=True) for s in samples))
    return out


async def test_sip_caller_presence_webhooks_and_connection_timeout(
    standin: StandIn, livekit_api: api.LiveKitAPI, webhook_sink: WebhookSink
) -> None:
    caller = await sip_call(
        livekit_api, standin.url, API_KEY, API_SECRET, room="call-1", fleet="acme"
    )
    token = caller_token(API_KEY, API_SECRET, room="call-1", identity="supervisor")
    supervisor = await LabRoom.connect(standin.url, token)
    other = await LabRoom.connect(
        standin.url, caller_token(API_KEY, API_SECRET, room="call-1", identity="listener")
    )
    assert set(other.participants) == {"sip_+15550100", "supervisor"}
    async with asyncio.timeout(30):
        await caller.abort()  # lost, no goodbye
        await supervisor.leave()  # clean goodbye
        [left] = await standin.events.wait_for(
            ev.ParticipantLeft, lambda e: e.identity == "sip_+15550100"
        )
        assert left.reason == Reason.CONNECTION_TIMEOUT  # after the 5 s cleanup timer
        await livekit_api.room.delete_room(api.DeleteRoomRequest(room="call-1"))
        await other.closed.wait()
        got = await webhook_sink.wait_for(8)
    assert other.removed_reason == "ROOM_DELETED"
    events = [receiver.receive(r.body.decode(), r.headers["Authorization"]) for r in got]
    seen = [(e.event, e.participant.identity, e.participant.disconnect_reason) for e in events]
    assert seen == [
        ("room_started", "", 0),
        ("participant_joined", "sip_+15550100", 0),
        ("participant_joined", "supervisor", 0),
        ("participant_joined", "listener", 0),
        ("participant_left", "supervisor", Reason.CLIENT_INITIATED),
        ("participant_left", "sip_+15550100", Reason.CONNECTION_TIMEOUT),
        ("participant_left", "listener", Reason.ROOM_DELETED),
        ("room_finished", "", 0),
    ]
    sip = events[1].participant
    assert sip.kind == api.ParticipantInfo.Kind.SIP
    attributes = dict(sip.attributes)
    assert attributes.pop("sip.callID").startswith("SCL_")
    assert attributes.pop("sip.trunkID").startswith("ST_")
    assert attributes.pop("sip.ruleID").startswith("SDR_")
    assert attributes == {
        "sip.phoneNumber": "+15550100",
        "sip.trunkPhoneNumber": "+15550199",
        "sip.callStatus": "active",
    }
    # the SIP room's dispatch to the plain fleet name stays pending
    ended = standin.events.of(ev.JobRequestEnded, lambda e: e.room == "call-1")
    assert [(e.agent_name, e.outcome) for e in ended] == [("acme", "no_worker")]


async def test_a_participant_that_stops_answering_is_a_connection_lost() -> None:
    """A stopped process keeps its TCP connection (the kernel answers for it) but not its
    transport: unanswered pings end it, then CONNECTION_TIMEOUT follows. A participant that
    answers stays, however long it says nothing."""
    config = StandInConfig(
        keys={API_KEY: API_SECRET}, port=0, transport_timeout_s=3.0, connection_timeout_s=0.2
    )
    async with StandIn(config) as lk, aiohttp.ClientSession() as http:
        lab = lab_url(lk.url)

        async def join(identity: str, *, answers: bool) -> aiohttp.ClientWebSocketResponse:
            token = caller_token(API_KEY, API_SECRET, room="frozen", identity=identity)
            headers = {"Authorization": f"Bearer {token}"}
            return await http.ws_connect(lab, headers=headers, autoping=answers)

        stopped = await join("stopped", answers=False)  # never reads: no pong goes back
        token = caller_token(API_KEY, API_SECRET, room="frozen", identity="alive")
        alive = await LabRoom.connect(lk.url, token)
        async with asyncio.timeout(30):
            [left] = await lk.events.wait_for(ev.ParticipantLeft, lambda e: e.room == "frozen")
        assert (left.identity, left.reason) == ("stopped", Reason.CONNECTION_TIMEOUT)
        assert set(lk.rooms.rooms["frozen"].participants) == {"alive"}
        await alive.leave()
        await stopped.close()


async def test_a_token_without_a_room_grant_is_refused(standin: StandIn) -> None:
    token = api.AccessToken(API_KEY, API_SECRET).with_identity("x").to_jwt()
    with pytest.raises(JoinError) as err:
        await LabRoom.connect(standin.url, token)
    assert err.value.status == 401


class EarSTT(stt.STT):
    """A streaming STT that transcribes nothing and keeps what the session fed it."""

    def __init__(self) -> None:
        super().__init__(capabilities=stt.STTCapabilities(streaming=True, interim_results=False))
        self.heard: list[rtc.AudioFrame] = []
        self.heard_enough = asyncio.Event()

    async def _recognize_impl(self, *_args: object, **_kwargs: object) -> stt.SpeechEvent:
        raise NotImplementedError

    def stream(self, **_kwargs: object) -> stt.RecognizeStream:
        return _EarStream(stt=self, conn_options=api_conn_options())


def api_conn_options() -> object:
    from livekit.agents.types import DEFAULT_API_CONNECT_OPTIONS

    return DEFAULT_API_CONNECT_OPTIONS


class _EarStream(stt.RecognizeStream):
    async def _run(self) -> None:
        ear = self._stt
        assert isinstance(ear, EarSTT)
        async for frame in self._input_ch:
            if isinstance(frame, rtc.AudioFrame):
                ear.heard.append(frame)
                if sum(f.duration for f in ear.heard) >= 0.2:
                    ear.heard_enough.set()


async def test_audio_flows_both_ways_between_a_caller_and_an_agent_session(
    standin: StandIn,
) -> None:
    agent_room = await LabRoom.connect(
        standin.url, agent_token(API_KEY, API_SECRET, room="call-1", identity="agent-AJ_lab")
    )
    caller = await LabRoom.connect(
        standin.url, caller_token(API_KEY, API_SECRET, room="call-1", identity="caller")
    )
    ear = EarSTT()
    session: AgentSession = AgentSession(stt=ear)
    wire_session(session, agent_room, sender="caller")
    await session.start(Agent(instructions="lab"))
    try:
        async with asyncio.timeout(30):
            # caller → session: 20 frames (0.4 s) spoken in real time reach the session's STT
            for pcm in tone(20):
                await caller.send(pcm)
                await asyncio.sleep(0.02)  # a caller speaks in real time
            await ear.heard_enough.wait()

            # session → caller: the session says 0.2 s of audio; the caller hears it
            async def speech() -> AsyncIterator[rtc.AudioFrame]:
                for pcm in tone(10, hz=880.0):
                    yield rtc.AudioFrame(pcm, SAMPLE_RATE, 1, FRAME_SAMPLES)

            handle = session.say("hello", audio=speech(), add_to_chat_ctx=False)
            heard = [await caller.audio.get() for _ in range(10)]
            await handle
    finally:
        await session.aclose()
        await caller.leave()
        await agent_room.leave()
    assert {c.sender for c in heard} == {"agent-AJ_lab"}
    assert b"".join(c.pcm for c in heard) == b"".join(tone(10, hz=880.0))
    assert all(f.sample_rate == SAMPLE_RATE for f in ear.heard)
