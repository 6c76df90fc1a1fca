"""Spoken calls answered by the worker, every turn on the call's log (issue 6, acceptance 3): the
real plugins against the vendor fakes, silero on the caller's recorded speech, a real call-log
replica process on real Postgres, the caller hearing the agent."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp import WSCloseCode
from livekit import api
from livekit.protocol.agent import JobStatus

from pinecall_clients.calllog import CallLogClient
from pinecall_contracts.calls import CallOpen
from pinecall_labroom import LabRoom
from pinecall_loadlab.callers import LINES, HangUp, Say, Step, WaitForAgent, play
from pinecall_loadlab.livekit import StandIn
from pinecall_loadlab.livekit import events as ev
from pinecall_loadlab.livekit.callers import caller_token
from pinecall_loadlab.livekit.testing import API_KEY, API_SECRET
from pinecall_loadlab.vendors import Reply, ToolUse, VendorFakes
from pinecall_testkit.call_log import Process
from pinecall_testkit.roster import Keys
from pinecall_testkit.worker import CallEvents, kinds, of_kind, offer_call, read_log, serving
from pinecall_worker.server import Worker

AGENT = 4  # ParticipantInfo.Kind.AGENT
ANSWER = "Your order arrives on Thursday."
BYE = "Goodbye, and thank you for calling."


async def play_until_hung_up(caller: LabRoom, script: list[Step]) -> None:
    """Play ``script``; the agent hangs up (deletes the room) somewhere in it."""
    playing = asyncio.create_task(play(caller, script))
    await caller.closed.wait()
    playing.cancel()
    await asyncio.gather(playing, return_exceptions=True)


async def test_a_spoken_call_is_answered_and_its_log_holds_every_turn_ended_and_sealed(
    call_worker: Callable[..., Worker],
    caller: Callable[[str], Awaitable[LabRoom]],
    livekit_api: api.LiveKitAPI,
    vendor_fakes: VendorFakes,
    keys: Keys,
    call_log: Process,
    call_events: CallEvents,
) -> None:
    vendor_fakes.deepgram.script(LINES["question"], LINES["goodbye"])
    vendor_fakes.anthropic.script(
        Reply(text=ANSWER), Reply(tool=ToolUse(name="end_call")), Reply(text=BYE)
    )
    worker = call_worker()
    async with serving(worker):
        room = await caller("call-a3")
        async with asyncio.timeout(120):
            await offer_call(livekit_api, worker.name, room="call-a3", call="call_a3")
            opened = await call_events.wait("opened", "call_a3")
            heard = await play(room, [Say(line="question"), WaitForAgent(until_quiet_s=1.0)])
            await play_until_hung_up(room, [Say(line="goodbye"), WaitForAgent(timeout_s=60)])
            sealed = await call_events.wait("sealed", "call_a3")
        # the job closed its vendors' sockets before it sealed the call: Cartesia's pooled
        # one (its prewarm's) too, which the session does not close
        async with asyncio.timeout(10):
            await vendor_fakes.cartesia.state.wait_sockets_closed()
            await vendor_fakes.deepgram.state.wait_sockets_closed()
    assert vendor_fakes.cartesia.state.close_codes == [WSCloseCode.OK]
    # the caller heard the agent, after its question
    assert heard.agent_heard
    assert heard.agent_heard[0] > heard.said[0][2]
    assert room.removed_reason == "ROOM_DELETED"  # the agent hung up: end_call deletes the room
    assert (opened.worker, sealed.outcome) == (worker.name, "completed")
    log = await read_log(call_log.url, keys.production, "call_a3")
    assert log.state == "sealed"
    assert kinds(log)[0] == "call.started"
    assert kinds(log)[-2:] == ["call.ended", "call.sealed"]
    assert log.entries[0].data["worker"] == worker.name
    assert [t["text"] for t in of_kind(log, "turn.user")] == [LINES["question"], LINES["goodbye"]]
    agent = of_kind(log, "turn.agent")
    assert [t["text"] for t in agent] == [ANSWER, BYE]
    assert all(t["first_audio_s"] > 0 for t in agent)  # each turn's first audio, measured
    assert [t["name"] for t in of_kind(log, "turn.tool")] == ["end_call"]
    assert of_kind(log, "call.ended") == [
        {"outcome": "completed", "reason": "the agent ended the call"}
    ]
    # every entry the job wrote is on the log once, in the writer's order
    counted = [e.counted for e in log.entries if e.counted is not None]
    assert counted == list(range(len(counted)))
    assert "call.error" not in kinds(log)
    # its batches went through the worker's relay socket, with its other calls' (issue 20)
    assert worker.relay is not None
    assert worker.relay.relay.batches >= 1


async def test_a_job_without_a_job_offer_still_answers_and_logs_its_call_under_the_jobs_id(
    call_worker: Callable[..., Worker],
    standin: StandIn,
    livekit_api: api.LiveKitAPI,
    vendor_fakes: VendorFakes,
    keys: Keys,
    call_log: Process,
    call_events: CallEvents,
) -> None:
    vendor_fakes.deepgram.script(LINES["question"])
    vendor_fakes.anthropic.script(Reply(text=ANSWER))
    worker = call_worker()
    async with serving(worker):
        # LiveKit's own dispatch: the room's agents, no metadata at all
        await livekit_api.room.create_room(
            api.CreateRoomRequest(
                name="call-1", agents=[api.RoomAgentDispatch(agent_name=worker.name)]
            )
        )
        caller = await LabRoom.connect(
            standin.url, caller_token(API_KEY, API_SECRET, room="call-1", identity="caller")
        )
        async with asyncio.timeout(120):
            [offered] = await standin.events.wait_for(ev.JobOffered, lambda e: e.room == "call-1")
            await call_events.wait("opened", offered.job_id)
            script: list[Any] = [Say(line="question"), WaitForAgent(until_quiet_s=1.0), HangUp()]
            heard = await play(caller, script)
            sealed = await call_events.wait("sealed", offered.job_id)
            while worker.measures.minute.read(0).ended < 1:  # the job's word, over the socket
                worker.measures.arrived.clear()
                await worker.measures.arrived.wait()
    assert heard.agent_heard
    assert sealed.outcome == "caller_hangup"
    log = await read_log(call_log.url, keys.production, offered.job_id)
    assert (log.entries[0].kind, log.entries[0].data["room"]) == ("call.started", "call-1")
    assert [t["text"] for t in of_kind(log, "turn.agent")] == [ANSWER]
    # the turn and the end reached the worker's minute too
    minute = worker.state().minute
    assert minute is not None
    assert (minute.turns, minute.ended, minute.failed) == (1, 1, 0)


async def test_a_job_started_past_its_reoffer_opens_first_and_never_joins_a_call_another_holds(
    call_worker: Callable[..., Worker],
    caller: Callable[[str], Awaitable[LabRoom]],
    standin: StandIn,
    livekit_api: api.LiveKitAPI,
    vendor_fakes: VendorFakes,
    keys: Keys,
    call_log: Process,
    call_events: CallEvents,
) -> None:
    """Stop 12's trial: a job that started 14.7 s after its offer joined the room the overflow
    already held, and the caller heard two agents until the log refused the worker's open. A
    job past its re-offer opens first; refused, it leaves without joining. One whose call nobody
    holds opens it and answers."""
    vendor_fakes.deepgram.script(LINES["question"])
    vendor_fakes.anthropic.script(Reply(text=ANSWER))
    past = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=3)
    worker = call_worker()
    async with serving(worker), CallLogClient(call_log.url, keys.production) as overflow:
        held = await caller("call-held")
        async with asyncio.timeout(120):
            await overflow.open(
                CallOpen(
                    call="call_held",
                    agent="support-bot",
                    org="org_acme",
                    environment="production",
                    room="call-held",
                    worker="pinecall/overflow",
                )
            )
            await offer_call(
                livekit_api, worker.name, room="call-held", call="call_held", reoffer_at=past
            )
            [offered] = await standin.events.wait_for(
                ev.JobOffered, lambda e: e.room == "call-held"
            )
            await standin.events.wait_for(
                ev.JobStatusChanged,
                lambda e: e.job_id == offered.job_id and e.status != JobStatus.JS_RUNNING,
            )
            # the same worker, a late job whose call nobody holds: opened first, then answered
            free = await caller("call-free")
            await offer_call(
                livekit_api, worker.name, room="call-free", call="call_free", reoffer_at=past
            )
            opened = await call_events.wait("opened", "call_free")
            script: list[Any] = [Say(line="question"), WaitForAgent(until_quiet_s=1.0), HangUp()]
            heard = await play(free, script)
            await call_events.wait("sealed", "call_free")  # else the stop drains it 60 s
    agents = standin.events.of(ev.ParticipantJoined, lambda e: e.kind == AGENT)
    assert [e.room for e in agents] == ["call-free"]  # never into the room the overflow holds
    assert not held.closed.is_set()  # the caller of call-held was left to the overflow, alone
    log = await read_log(call_log.url, keys.production, "call_held")
    assert [e.data.get("worker") for e in log.entries if e.kind == "call.started"] == [
        "pinecall/overflow"
    ]
    assert opened.worker == worker.name
    assert heard.agent_heard


MACHINE_LOAD = (
    "event loop blocked for",
    "event loop late by",
    "VAD inference is slower than realtime",
)
"""What livekit-agents and the services' loop watchers warn of the machine's load (a loop that did
not run on time, silero behind real time): true on a loaded machine, and about the machine, not the
call."""


async def test_a_quiet_lab_call_leaves_no_warning_on_the_worker_log(
    call_worker: Callable[..., Worker],
    caller: Callable[[str], Awaitable[LabRoom]],
    livekit_api: api.LiveKitAPI,
    vendor_fakes: VendorFakes,
    call_events: CallEvents,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Issue 14 item 13: every call under the stand-in warned twice, untrue both times: "The job
    task completed without establishing a connection" (the job joins its lab room, not through
    ``ctx.connect()``) and "resume_false_interruption is enabled but audio output does not support
    pause, it will be ignored" (the lab room's output cannot pause)."""
    vendor_fakes.deepgram.script(LINES["question"])
    vendor_fakes.anthropic.script(Reply(text=ANSWER))
    worker = call_worker()
    caplog.set_level(logging.INFO)
    async with serving(worker):
        room = await caller("call-quiet")
        async with asyncio.timeout(120):
            await offer_call(livekit_api, worker.name, room="call-quiet", call="call_quiet")
            await call_events.wait("opened", "call_quiet")
            script: list[Any] = [Say(line="question"), WaitForAgent(until_quiet_s=1.0), HangUp()]
            heard = await play(room, script)
            sealed = await call_events.wait("sealed", "call_quiet")
    assert heard.agent_heard
    assert sealed.outcome == "caller_hangup"
    warned = [
        f"{r.name}: {r.getMessage()}"
        for r in caplog.records
        if r.levelno >= logging.WARNING and not r.getMessage().startswith(MACHINE_LOAD)
    ]
    assert warned == []
