"""A worker LiveKit no longer holds is offered no caller (issue 14, item 7): its agent socket cut
and kept down, or LiveKit's side of it hung, while its heartbeats go on. It has the most seats
free, so while LiveKit held it every caller would be offered to it first; once its heartbeat says
LiveKit does not hold it, the callers go to the worker LiveKit holds, and once the fault lifts and
it registers again it takes the next caller."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace

import pytest

from pinecall_contracts.fleet import WorkerRow
from pinecall_loadlab.livekit import StandIn
from pinecall_loadlab.livekit import events as ev
from pinecall_loadlab.scenarios.chain import Chain, ChainConfig, runtime_chain
from pinecall_loadlab.scenarios.runtime_choosing import place_calls


async def roster_says(chain: Chain, worker: str, holds: Callable[[WorkerRow], bool]) -> None:
    """Once the roster's row of ``worker`` ``holds``, every dispatcher replica has read it."""
    view = chain.roster.app.state.roster
    await view.changes.wait_for(
        lambda: any(r.worker == worker and holds(r) for r in view.view("pinecall").workers),
        timeout=60,
    )
    await chain.heard()


@pytest.mark.parametrize("fault", ["cut", "hang"])
async def test_a_worker_livekit_does_not_hold_is_offered_no_caller_until_it_registers_again(
    chain: Chain, fault: str
) -> None:
    lost = await chain.worker("worker-lost", seats=8)
    held = await chain.worker("worker-held", seats=4)
    (chain.lk.cut_link if fault == "cut" else chain.lk.hang_link)(lost.name, 600)
    await roster_says(chain, lost.name, lambda r: r.agent_name is None)
    async with asyncio.timeout(90):
        calls, callers = await place_calls(chain, prefix=fault, calls=3, interval_s=0.2)
    assert [c.by for c in calls] == [held.name] * 3
    assert chain.lk.events.of(ev.DispatchCreated, lambda e: e.agent_name == lost.name) == []
    chain.lk.mend_link(lost.name)
    await roster_says(chain, lost.name, lambda r: r.agent_name == lost.name)
    async with asyncio.timeout(60):
        after, more = await place_calls(chain, prefix=f"{fault}-mended", calls=1)
    assert [c.by for c in after] == [lost.name]
    for caller in callers + more:
        await caller.leave()


async def test_a_caller_who_rings_as_a_workers_link_is_cut_is_not_offered_to_it(
    standin: StandIn, chain_config: ChainConfig
) -> None:
    """The dispatcher keeps its rows 60 s here (1 s in production), so only the heartbeat it hears
    itself on NATS can tell it, before its next read, that LiveKit dropped the worker, and that
    LiveKit holds it again (issue 14, item 7: a caller 0.1 s after a cut was offered to it)."""
    slow_rows = chain_config.dispatcher | {"roster_max_age_s": 60.0}
    async with runtime_chain(standin, replace(chain_config, dispatcher=slow_rows)) as chain:
        lost = await chain.worker("worker-lost", seats=8)
        held = await chain.worker("worker-held", seats=4)
        await chain.heard()  # the rows, as of now, name both workers registered
        view = chain.dispatchers[0].app.state.dispatcher.roster

        def newest_says(registered: bool) -> bool:
            newest = view.newest(lost.name)
            return newest is not None and (newest.agent_name is not None) is registered

        chain.lk.cut_link(lost.name, 600)
        await view.said.wait_for(lambda: newest_says(False), timeout=30)
        async with asyncio.timeout(90):
            calls, callers = await place_calls(chain, prefix="cut-now", calls=2, interval_s=0.2)
        assert [c.by for c in calls] == [held.name] * 2
        assert chain.lk.events.of(ev.DispatchCreated, lambda e: e.agent_name == lost.name) == []
        chain.lk.mend_link(lost.name)
        await view.said.wait_for(lambda: newest_says(True), timeout=60)
        async with asyncio.timeout(60):
            after, more = await place_calls(chain, prefix="mended-now", calls=1)
        assert [c.by for c in after] == [lost.name]
        for caller in callers + more:
            await caller.leave()


async def test_a_caller_offered_to_a_worker_whose_link_hung_is_offered_again_once_it_says_so(
    standin: StandIn, chain_config: ChainConfig
) -> None:
    """The worker notices a hung LiveKit in 3 s; a caller who rang meanwhile was offered to it and
    LiveKit will never give it that job. The re-offer waits 60 s here: the caller is answered
    only because the worker's heartbeat saying LiveKit dropped it makes its room due at once."""
    slow_reoffer = chain_config.dispatcher | {"reoffer_s": 60.0, "fleet_wait_s": 60.0}
    async with runtime_chain(standin, replace(chain_config, dispatcher=slow_reoffer)) as chain:
        lost = await chain.worker("worker-lost", seats=8)
        held = await chain.worker("worker-held", seats=4)
        await chain.heard()
        chain.lk.hang_link(lost.name, 600)
        async with asyncio.timeout(45):
            calls, callers = await place_calls(chain, prefix="hung", calls=1)
        offered = chain.lk.events.of(ev.DispatchCreated, lambda e: e.room == "hung-1")
        assert [e.agent_name for e in offered] == [lost.name, held.name]
        assert [c.by for c in calls] == [held.name]
        for caller in callers:
            await caller.leave()
