"""SIGTERM with calls in flight (issue 6, acceptance 5; seed 000, "Deploys drain, cordons
shrink"): no new call is taken, the calls finish and the worker exits; past the drain timeout
the calls still held are ended ``drained`` and sealed. (A cordon's exit 3 after its calls finish
is ``test_worker.py``.)"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from livekit import api

from pinecall_labroom import LabRoom
from pinecall_loadlab.callers import LINES, Say, WaitForAgent, play
from pinecall_loadlab.livekit import StandIn
from pinecall_loadlab.livekit import events as ev
from pinecall_loadlab.vendors import Reply, VendorFakes
from pinecall_servicekit.lifecycle import ExitCode
from pinecall_testkit.call_log import Process
from pinecall_testkit.roster import Keys, Replica
from pinecall_testkit.worker import CallEvents, of_kind, offer_call, read_log, serving
from pinecall_worker.server import Worker


async def draining(roster: Replica) -> None:
    """Until the roster heard the worker say it drains."""
    view = roster.app.state.roster
    await view.changes.wait_for(
        lambda: bool((w := view.view("pinecall").workers) and w[0].draining), timeout=30
    )


async def test_sigterm_takes_no_new_call_lets_the_call_finish_then_exits_0(
    call_worker: Callable[..., Worker],
    caller: Callable[[str], Awaitable[LabRoom]],
    standin: StandIn,
    livekit_api: api.LiveKitAPI,
    roster: Replica,
    call_events: CallEvents,
) -> None:
    worker = call_worker(drain_timeout_s=600)
    async with serving(worker) as running:
        held = await caller("call-held")
        async with asyncio.timeout(120):
            await offer_call(livekit_api, worker.name, room="call-held", call="call_held")
            await call_events.wait("opened", "call_held")
            worker.stop()  # what SIGTERM does
            await draining(roster)
            await offer_call(livekit_api, worker.name, room="call-late", call="call_late")
            [late] = await standin.events.wait_for(
                ev.JobRequestEnded, lambda e: e.room == "call-late"
            )
            assert late.outcome != "assigned"  # declined: no new call while draining
            assert not running.done()  # the call in flight holds the worker
            await held.leave()  # the call finishes
            sealed = await call_events.wait("sealed", "call_held")
            assert await running == ExitCode.OK
    assert sealed.outcome == "caller_hangup"
    assert ("opened", "call_late") not in call_events.heard


async def test_past_the_drain_timeout_the_calls_held_are_ended_drained_and_sealed(
    call_worker: Callable[..., Worker],
    caller: Callable[[str], Awaitable[LabRoom]],
    livekit_api: api.LiveKitAPI,
    vendor_fakes: VendorFakes,
    keys: Keys,
    call_log: Process,
    call_events: CallEvents,
) -> None:
    vendor_fakes.deepgram.script(LINES["question"])
    vendor_fakes.anthropic.script(Reply(text="It arrives on Thursday."))
    worker = call_worker(drain_timeout_s=1)
    async with serving(worker) as running:
        callers = [await caller(f"call-{n}") for n in (1, 2)]
        async with asyncio.timeout(120):
            for n in (1, 2):
                await offer_call(livekit_api, worker.name, room=f"call-{n}", call=f"call_{n}")
                await call_events.wait("opened", f"call_{n}")
            await play(callers[0], [Say(line="question"), WaitForAgent(until_quiet_s=1.0)])
            worker.stop()  # the callers stay in their calls past the drain timeout
            assert await running == ExitCode.OK
            sealed = [await call_events.wait("sealed", f"call_{n}") for n in (1, 2)]
    # each job, shut down by the worker closing it, ended its own call
    assert [(s.outcome, s.cause) for s in sealed] == [("drained", "shutdown")] * 2
    log = await read_log(call_log.url, keys.production, "call_1")
    assert log.state == "sealed"
    assert [t["text"] for t in of_kind(log, "turn.agent")] == ["It arrives on Thursday."]
    assert of_kind(log, "call.ended")[0]["outcome"] == "drained"
    for room in callers:
        await room.leave()
