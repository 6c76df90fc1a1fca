"""Call-log restarted in the middle of a call loses and doubles no entry of it (issue 6,
acceptance 4; seed 002, "The gateway restarts"): the replica process is SIGKILLed between two
turns and started again on its port while the caller speaks; the job's writer retries its batch
unchanged after the same count, and the log takes each entry once."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from urllib.parse import urlparse

import pytest
from livekit import api

from pinecall_labroom import LabRoom
from pinecall_loadlab.callers import LINES, HangUp, Say, WaitForAgent, play
from pinecall_loadlab.vendors import Reply, VendorFakes
from pinecall_testkit.call_log import served
from pinecall_testkit.roster import Keys
from pinecall_testkit.worker import CallEvents, kinds, of_kind, offer_call, read_log, serving
from pinecall_worker.server import Worker

pytestmark = pytest.mark.long  # scheduled first (the testing plugin)

ANSWERS = ["It arrives on Thursday.", "Before noon.", "You are welcome."]
TURN = [Say(line="question"), WaitForAgent(until_quiet_s=1.0)]


async def test_call_log_killed_and_started_again_mid_call_loses_and_doubles_no_entry(
    worker_for: Callable[..., Worker],
    caller: Callable[[str], Awaitable[LabRoom]],
    call_log_env: dict[str, str],
    livekit_api: api.LiveKitAPI,
    vendor_fakes: VendorFakes,
    keys: Keys,
    call_events: CallEvents,
) -> None:
    vendor_fakes.deepgram.script(*[LINES["question"]] * 3)
    vendor_fakes.anthropic.script(*[Reply(text=a) for a in ANSWERS])
    async with contextlib.AsyncExitStack() as stack:
        (first,) = await stack.enter_async_context(served(call_log_env, 1))
        port = urlparse(first.url).port
        assert port is not None
        worker = worker_for(first.url)
        await stack.enter_async_context(serving(worker))
        room = await caller("call-a4")
        async with asyncio.timeout(180):
            await offer_call(livekit_api, worker.name, room="call-a4", call="call_a4")
            await call_events.wait("opened", "call_a4")
            await play(room, TURN)
            first.kill()  # nothing of it runs on: a batch may die with it, answered or not
            await first.proc.wait()
            await play(room, TURN)  # said while nobody answers: the writer keeps retrying
            (again,) = await stack.enter_async_context(served(call_log_env, 1, ports=[port]))
            await play(room, [*TURN, HangUp()])
            sealed = await call_events.wait("sealed", "call_a4")
        log = await read_log(again.url, keys.production, "call_a4")
    assert sealed.outcome == "caller_hangup"
    assert [t["text"] for t in of_kind(log, "turn.user")] == [LINES["question"]] * 3
    assert [t["text"] for t in of_kind(log, "turn.agent")] == ANSWERS
    counted = [e.counted for e in log.entries if e.counted is not None]
    assert counted == list(range(len(counted)))  # every entry once, in the writer's order
    assert kinds(log)[0] == "call.started"
    assert kinds(log)[-2:] == ["call.ended", "call.sealed"]
    assert [e.seq for e in log.entries] == list(range(1, len(log.entries) + 1))
