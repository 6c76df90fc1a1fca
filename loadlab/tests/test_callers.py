"""Callers who speak: the committed recordings, and scripts played into a lab room in real time."""

from __future__ import annotations

import asyncio
import wave

import msgspec
import numpy as np
import pytest
from livekit import api

from pinecall_labroom import LabRoom
from pinecall_loadlab.callers import (
    LINES,
    CallerLog,
    HangUp,
    Interrupt,
    Pause,
    Say,
    Step,
    WaitForAgent,
    WaitForAnswer,
    frames,
    line_pcm,
    play,
    silence,
)
from pinecall_loadlab.callers.speech import wav_path
from pinecall_loadlab.callers.traffic import TrafficPlan, script
from pinecall_loadlab.livekit import StandIn
from pinecall_loadlab.livekit.callers import caller_token
from pinecall_loadlab.livekit.testing import API_KEY, API_SECRET


def test_every_line_is_a_short_16_khz_mono_recording() -> None:
    for line in LINES:
        with wave.open(str(wav_path(line))) as w:
            assert (w.getframerate(), w.getnchannels(), w.getsampwidth()) == (16000, 1, 2)
            seconds = w.getnframes() / w.getframerate()
        assert 1.0 < seconds < 5.0
        assert len(line_pcm(line)) == w.getnframes() * 3 * 2  # 48 kHz in the room
        assert sounds_like_speech(line_pcm(line)), line


def sounds_like_speech(pcm: bytes, rate: int = 48_000) -> bool:
    """Speech, not silence nor a tone: it pauses (some 20 ms windows under -40 dBFS, most over),
    and its zero-crossing rate varies across the voiced windows as vowels and consonants do (a
    tone's is constant)."""
    x = np.frombuffer(pcm, dtype="<i2").astype(np.float64)
    width = rate // 50
    windows = x[: len(x) // width * width].reshape(-1, width)
    dbfs = 20 * np.log10(np.sqrt((windows**2).mean(axis=1)) / 32768 + 1e-12)
    voiced = dbfs > -40
    if not 0.3 < voiced.mean() < 0.95:
        return False
    crossings = (np.diff(np.sign(windows[voiced]), axis=1) != 0).mean(axis=1)
    return bool(crossings.std() / crossings.mean() > 0.3)


def test_the_speech_check_refuses_a_tone_even_with_pauses() -> None:
    t = np.arange(48_000 * 2) / 48_000
    tone = 0.3 * 32767 * np.sin(2 * np.pi * 440 * t)
    gapped = np.where(t % 0.5 < 0.3, tone, 0.0)
    assert not sounds_like_speech(tone.astype("<i2").tobytes())
    assert not sounds_like_speech(gapped.astype("<i2").tobytes())
    assert not sounds_like_speech(bytes(48_000 * 2))


def test_a_script_is_json() -> None:
    script: list[Step] = [Say(line="greeting"), Pause(seconds=0.5), WaitForAgent(), HangUp()]
    raw = msgspec.json.encode(script)
    assert raw.startswith(b'[{"type":"say","line":"greeting"}')
    assert msgspec.json.decode(raw, type=list[Step]) == script


def test_a_caller_of_an_agent_that_greets_hears_the_greeting_out_before_its_first_line() -> None:
    plan = TrafficPlan(environments=[], dispatcher_url="", call_log_url="", listen_s=1.0)
    turn: list[Step] = [Say(line="greeting"), WaitForAgent(timeout_s=30.0), Pause(seconds=1.0)]
    assert script(1, plan) == [*turn, HangUp()]
    greeted = msgspec.structs.replace(plan, greeted=True)
    assert script(1, greeted) == [WaitForAgent(timeout_s=30.0, until_quiet_s=0.5), *turn, HangUp()]


async def join(standin: StandIn, identity: str) -> LabRoom:
    token = caller_token(API_KEY, API_SECRET, room="call-1", identity=identity)
    return await LabRoom.connect(standin.url, token)


async def test_a_caller_says_a_line_and_hangs_up(standin: StandIn) -> None:
    agent = await join(standin, "agent")
    caller = await join(standin, "caller")
    async with asyncio.timeout(20):
        log = await play(caller, [Say(line="yes"), Pause(seconds=0.1), HangUp()])
        sent = frames(line_pcm("yes")) + silence(0.1)
        heard = [await agent.audio.get() for _ in sent]
        while (left := await agent.presence.get())["type"] != "participant_left":
            pass
    await agent.leave()
    assert [c.pcm for c in heard] == sent
    assert left["participant"]["identity"] == "caller"
    [(line, start, end)] = log.said
    assert line == "yes"
    assert end - start >= 0.9 * len(frames(line_pcm("yes"))) * 0.02  # real time, not a burst
    assert log.hung_up is not None


async def test_a_caller_interrupts_the_agent(standin: StandIn) -> None:
    agent = await join(standin, "agent")
    caller = await join(standin, "caller")

    async def agent_speaks() -> None:
        await agent.audio.get()  # the caller's first frame: the caller is in the room
        for pcm in frames(line_pcm("greeting")):
            await agent.send(pcm)
            await asyncio.sleep(0.02)  # an agent speaks in real time

    speaking = asyncio.create_task(agent_speaks())
    async with asyncio.timeout(20):
        log = await play(caller, [Interrupt(line="yes"), HangUp()])
    speaking.cancel()
    await asyncio.gather(speaking, return_exceptions=True)
    await agent.leave()
    [(_, started, _)] = log.said
    assert log.agent_heard[0] <= started  # said over the agent, once it spoke


async def join_agent(standin: StandIn, name: str) -> LabRoom:
    token = caller_token(
        API_KEY, API_SECRET, room="call-1", identity="agent", kind="agent",
        attributes={"lk.agent_name": name},
    )  # fmt: skip
    return await LabRoom.connect(standin.url, token)


async def test_a_caller_rings_until_an_agent_answers_and_knows_which(standin: StandIn) -> None:
    caller = await join(standin, "caller")
    changes: list[str] = []
    log = CallerLog()
    script = [WaitForAnswer(timeout_s=10), WaitForAgent(timeout_s=10), HangUp()]
    playing = asyncio.create_task(play(caller, script, log=log, on_change=changes.append))
    agent = await join_agent(standin, "pinecall/worker-a.1791067258")
    async with asyncio.timeout(20):
        await caller.wait_for_participant(kind="AGENT")
        for pcm in frames(line_pcm("yes")):
            await agent.send(pcm)
        assert await playing is log
    await agent.leave()
    assert log.answered_by == "pinecall/worker-a.1791067258"
    assert log.answered is not None
    assert log.answered <= log.agent_heard[0]
    assert changes == ["answered", "heard"]
    assert log.hung_up is not None
    assert log.closed is None


async def test_nobody_answering_is_a_timeout(standin: StandIn) -> None:
    caller = await join(standin, "caller")
    log = CallerLog()
    with pytest.raises(TimeoutError):
        await play(caller, [WaitForAnswer(timeout_s=0.2), HangUp()], log=log)
    await caller.leave()
    assert log.answered is None


async def test_a_room_the_far_end_deletes_ends_the_script_without_an_error(
    standin: StandIn, livekit_api: api.LiveKitAPI
) -> None:
    caller = await join(standin, "caller")
    agent = await join_agent(standin, "pinecall/overflow")
    script = [WaitForAnswer(timeout_s=10), WaitForAgent(timeout_s=30), HangUp()]
    playing = asyncio.create_task(play(caller, script))
    async with asyncio.timeout(20):
        await caller.wait_for_participant(kind="AGENT")
        await livekit_api.room.delete_room(api.DeleteRoomRequest(room="call-1"))
        log = await playing
    assert log.answered_by == "pinecall/overflow"
    assert log.closed is not None
    assert log.hung_up is None
    assert caller.removed_reason == "ROOM_DELETED"
    await agent.abort()
