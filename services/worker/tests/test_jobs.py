"""A job's process that dies ends its call ``failed`` — the log says so, with why — never as an
open call nobody answers (issue 6, "The call"). The PROCESS executor: the point is the process,
forked from livekit-agents' forkserver with the plugins the worker preloaded."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Awaitable, Callable

from livekit import api
from livekit.agents import JobExecutorType

from pinecall_labroom import LabRoom
from pinecall_testkit.call_log import Process
from pinecall_testkit.roster import Keys
from pinecall_testkit.worker import CallEvents, of_kind, offer_call, read_log, serving
from pinecall_worker.server import Worker


async def test_a_job_process_killed_mid_call_ends_its_call_failed_and_leaves_it_unsealed(
    call_worker: Callable[..., Worker],
    caller: Callable[[str], Awaitable[LabRoom]],
    livekit_api: api.LiveKitAPI,
    keys: Keys,
    call_log: Process,
    call_events: CallEvents,
) -> None:
    worker = call_worker(executor=JobExecutorType.PROCESS)
    async with serving(worker, within_s=180):
        assert worker.not_ready() == []  # registered, the plugins loaded for the forkserver
        room = await caller("call-kill")
        async with asyncio.timeout(120):
            await offer_call(livekit_api, worker.name, room="call-kill", call="call_kill")
            await call_events.wait("opened", "call_kill")
            [held] = worker.jobs.calls()
            assert (held.offer.call, held.offer.room) == ("call_kill", "call-kill")
            assert held.pid is not None
            assert held.pid != os.getpid()
            os.kill(held.pid, signal.SIGKILL)  # no shutdown runs in it: the main process must
            ended = await call_events.wait("ended", "call_kill")
            while worker.measures.minute.read(0).failed < 1:
                worker.jobs.changed.clear()
                await worker.jobs.changed.wait()
        assert worker.jobs.calls() == []
        await room.leave()
    assert ended.outcome == "failed"
    log = await read_log(call_log.url, keys.production, "call_kill")
    assert of_kind(log, "call.ended") == [
        {"outcome": "failed", "reason": "the job's process exited with code -9"}
    ]
    # not sealed: a sentence job sent into the room may still write after the dead job's count
    assert log.state == "ended"
    minute = worker.state().minute
    assert minute is not None
    assert (minute.ended, minute.failed) == (1, 1)


async def test_past_the_drain_timeout_a_job_that_cannot_end_its_call_has_it_sealed_drained(
    call_worker: Callable[..., Worker],
    caller: Callable[[str], Awaitable[LabRoom]],
    livekit_api: api.LiveKitAPI,
    keys: Keys,
    call_log: Process,
    call_events: CallEvents,
) -> None:
    # a job frozen (SIGSTOP) answers no shutdown: livekit-agents kills it after half the seal
    # window, and the main process ends and seals its call within the rest
    worker = call_worker(executor=JobExecutorType.PROCESS, drain_timeout_s=1, seal_timeout_s=10)
    async with serving(worker, within_s=180) as running:
        room = await caller("call-stuck")
        async with asyncio.timeout(120):
            await offer_call(livekit_api, worker.name, room="call-stuck", call="call_stuck")
            await call_events.wait("opened", "call_stuck")
            [held] = worker.jobs.calls()
            assert held.pid is not None
            os.kill(held.pid, signal.SIGSTOP)
            worker.stop()
            sealed = await call_events.wait("sealed", "call_stuck")
            await running
        await room.leave()
    assert (sealed.outcome, sealed.cause) == ("drained", "drain_timeout")
    log = await read_log(call_log.url, keys.production, "call_stuck")
    assert of_kind(log, "call.ended") == [
        {
            "outcome": "drained",
            "reason": "the job's process exited with code -9",
            "cause": "drain_timeout",
        }
    ]
    assert log.state == "sealed"
