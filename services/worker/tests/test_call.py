"""A spoken call answered by the worker: the real plugins against the vendor fakes, silero on the
caller's real speech, the caller hearing the agent, the turn measured into the worker's minute
(issue 6, acceptance 3 without the log, which comes with call-log)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import msgspec
from livekit import api
from livekit.agents import JobExecutorType

from pinecall_labroom import LabRoom
from pinecall_loadlab.callers import LINES, Say, WaitForAgent, play
from pinecall_loadlab.livekit import StandIn
from pinecall_loadlab.livekit.callers import caller_token
from pinecall_loadlab.livekit.testing import API_KEY, API_SECRET
from pinecall_loadlab.vendors import Reply, VendorFakes
from pinecall_roster.testing import Keys, Replica, bearer
from pinecall_worker.call import entrypoint, prewarm
from pinecall_worker.server import Worker
from pinecall_worker.settings import WorkerSettings


async def test_a_caller_who_speaks_is_answered_and_the_turn_is_measured(
    standin: StandIn, vendor_fakes: VendorFakes, roster: Replica, keys: Keys, tmp_path: Path
) -> None:
    settings = WorkerSettings.from_env(
        {},
        fleet="pinecall",
        fleet_key=keys.production,
        max_jobs=2,
        worker_host="worker-call",
        livekit_url=standin.url,
        livekit_api_key=API_KEY,
        livekit_api_secret=API_SECRET,
        heartbeat_s=3600,
        drain_timeout_s=5,
        lab_rooms=True,
        measures_socket=str(tmp_path / "measures.sock"),
        deepgram_url=vendor_fakes.deepgram_url,
        anthropic_url=vendor_fakes.anthropic_url,
        cartesia_url=vendor_fakes.cartesia_url,
        deepgram_api_key="lab",
        anthropic_api_key="lab",
        cartesia_api_key="lab",
    )
    vendor_fakes.deepgram.script(LINES["question"])
    vendor_fakes.anthropic.script(Reply(text="Your order arrives on Thursday."))
    worker = Worker(
        settings,
        entrypoint,
        prewarm=prewarm,
        roster=roster,
        executor=JobExecutorType.THREAD,
        num_idle_processes=1,
    )
    running = asyncio.create_task(worker.run())
    caller: LabRoom | None = None
    try:
        async with asyncio.timeout(90):
            await worker.registered.wait()
            await standin_room(standin, worker.name)
            caller = await LabRoom.connect(
                standin.url, caller_token(API_KEY, API_SECRET, room="call-1", identity="caller")
            )
            heard = await play(caller, [Say(line="question"), WaitForAgent(until_quiet_s=1.0)])
            assert heard.agent_heard, "the caller heard the agent"
            assert heard.agent_heard[0] > heard.said[0][2]
            minute = worker.measures.minute
            while minute.read(time.monotonic()).turns < 1:
                worker.measures.arrived.clear()
                await worker.measures.arrived.wait()
        assert vendor_fakes.cartesia.transcripts[0].strip() == "Your order arrives on Thursday."
        await worker.heartbeat.beat()
        r = await roster.get(
            "/v1/ops/fleet", params={"fleet": "pinecall"}, headers=bearer(keys.operator)
        )
        [row] = r.json()["fleets"][0]["workers"]
        assert (row["worker"], row["active"], row["seats"]) == (worker.name, 1, 2)
        sent = msgspec.json.decode(msgspec.json.encode(worker.state()))
        assert sent["minute"]["turns"] == 1
    finally:
        if caller is not None:
            await caller.leave()
        worker.stop()
        async with asyncio.timeout(30):
            await running


async def standin_room(standin: StandIn, agent_name: str) -> None:
    """A room as LiveKit SIP makes one for a call, dispatched to ``agent_name``."""
    async with api.LiveKitAPI(standin.url.replace("ws", "http", 1), API_KEY, API_SECRET) as lk:
        await lk.room.create_room(
            api.CreateRoomRequest(
                name="call-1", agents=[api.RoomAgentDispatch(agent_name=agent_name)]
            )
        )
