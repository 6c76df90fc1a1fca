"""Acceptance 2: a full turn through livekit-agents' AgentSession — silero VAD and the three real
plugins against the fakes, a caller speaking a recorded question into a lab room — and the
session's per-turn metrics move when a fake's latency does."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from livekit.agents import Agent, AgentSession, ConversationItemAddedEvent
from livekit.plugins import silero

from pinecall_labroom import LabRoom
from pinecall_labroom.agents import wire_session
from pinecall_loadlab.callers import LINES, Say, WaitForAgent, play
from pinecall_loadlab.livekit import StandIn
from pinecall_loadlab.livekit.callers import agent_token, caller_token
from pinecall_loadlab.livekit.testing import API_KEY, API_SECRET
from pinecall_loadlab.vendors import Reply, VendorFakes
from pinecall_loadlab.vendors.testing import LabPlugins

pytestmark = pytest.mark.long  # scheduled first (the testing plugin)

ADDED_TTFT_S = 1.0


async def test_a_spoken_question_gets_a_spoken_answer_and_metrics_follow_the_model(
    standin: StandIn, vendor_fakes: VendorFakes, lab_plugins: LabPlugins
) -> None:
    agent_room = await LabRoom.connect(
        standin.url, agent_token(API_KEY, API_SECRET, room="call-1", identity="agent-AJ_turn")
    )
    caller = await LabRoom.connect(
        standin.url, caller_token(API_KEY, API_SECRET, room="call-1", identity="caller")
    )
    vendor_fakes.deepgram.script(LINES["question"], LINES["question"], LINES["question"])
    answer = "Your order arrives on Thursday."
    vendor_fakes.anthropic.script(Reply(text=answer), Reply(text=answer), Reply(text=answer))
    # Preemptive generation (on by default) starts the model at the final transcript and holds
    # the reply until the turn ends, hiding up to the endpointing delay of its time to first
    # token; off, the turn is sequential and the whole of it shows in e2e_latency.
    session: AgentSession[Any] = AgentSession(
        stt=lab_plugins.stt,
        llm=lab_plugins.llm,
        tts=lab_plugins.tts,
        vad=silero.VAD.load(),
        turn_handling={
            # chosen, not auto-selected: the auto-selected turn detector model adds 0.58 s or
            # 2.5 s to a turn at random, which would drown the latency this test moves
            "turn_detection": "vad",
            "preemptive_generation": {"enabled": False},
        },
    )
    turns: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    users: list[str] = []

    def on_item(ev: ConversationItemAddedEvent) -> None:
        item = ev.item
        if item.type == "message" and item.role == "user":
            users.append(item.text_content or "")
        elif item.type == "message" and item.role == "assistant":
            turns.put_nowait(dict(item.metrics))

    session.on("conversation_item_added", on_item)
    wire_session(session, agent_room, sender="caller")
    await session.start(Agent(instructions="You are a shop's assistant. Answer briefly."))
    try:
        async with asyncio.timeout(90):
            # a first turn pays for cold connections (the TTS socket, the model's client): it is
            # not compared, so a loaded machine's start-up cannot pass for the model's latency
            await play(caller, [Say(line="question"), WaitForAgent(until_quiet_s=1.0)])
            await turns.get()
            first = await play(caller, [Say(line="question"), WaitForAgent(until_quiet_s=1.0)])
            fast = await turns.get()
            vendor_fakes.anthropic.state.configure(
                first_s=vendor_fakes.anthropic.state.config.first_s + ADDED_TTFT_S
            )
            second = await play(caller, [Say(line="question"), WaitForAgent(until_quiet_s=1.0)])
            slow = await turns.get()
    finally:
        await session.aclose()
        await caller.leave()
        await agent_room.leave()
    # the caller heard the agent after it finished its question, and the session heard it right
    # (how much later the caller hears the slow turn is not compared: under a loaded machine the
    # caller's side of the lab transport did not track the model's added latency reliably; the
    # session's own metrics below are the measure the issue names)
    assert all(log.agent_heard[0] - log.said[0][2] > 0 for log in (first, second))
    assert users == [LINES["question"]] * 3
    assert vendor_fakes.cartesia.transcripts[0].strip() == answer
    # the model's time to first token moved by ADDED_TTFT_S: the session's numbers move with it
    assert slow["llm_node_ttft"] - fast["llm_node_ttft"] >= ADDED_TTFT_S / 2
    assert slow["e2e_latency"] - fast["e2e_latency"] >= ADDED_TTFT_S / 2
    assert fast["e2e_latency"] > 0
