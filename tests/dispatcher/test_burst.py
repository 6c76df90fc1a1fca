"""A burst faster than LiveKit's load report (issue 7, acceptance 5): 32 calls placed within 2 s
onto two workers of 16 seats each. Every call is answered by an agent, none is silent, none goes
to the overflow, and no worker is past its seats: the dispatcher counts the rooms it offered and
the calls it saw open, not only the last heartbeat (which may be 5 s old)."""

from __future__ import annotations

import asyncio
from collections import Counter

from pinecall_loadlab.livekit import events as ev
from pinecall_loadlab.scenarios.chain import Chain
from pinecall_loadlab.scenarios.runtime_choosing import place_calls


async def test_32_calls_in_2_s_onto_two_workers_of_16_seats(chain: Chain) -> None:
    a = await chain.worker("worker-a", seats=16)
    b = await chain.worker("worker-b", seats=16)
    await chain.overflow()
    async with asyncio.timeout(120):
        calls, callers = await place_calls(
            chain, prefix="burst", calls=32, interval_s=2 / 32, settle_s=90
        )
    answered = Counter(c.by for c in calls)
    assert answered == {a.name: 16, b.name: 16}
    for worker in (a, b):
        assert worker.worker.active == 16  # its jobs: never past its seats
    overflowed = chain.lk.events.of(
        ev.DispatchCreated, lambda e: e.agent_name.endswith("/overflow")
    )
    assert overflowed == []
    for c in callers:
        await c.leave()
