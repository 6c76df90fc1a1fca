"""The seat the dispatcher offers is a seat LiveKit gives a job to (issue 14, item 6).

What the worker tells LiveKit and what the dispatcher counts agree, bursts included: offers
accepted and not launched yet weigh one seat each at livekit-agents, not the framework's guess
(``pinecall_worker.counting``). Every wait awaits an event of the stand-in or the dispatcher.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest

from pinecall_loadlab.livekit import StandInConfig
from pinecall_loadlab.livekit import events as ev
from pinecall_loadlab.scenarios.chain import Chain
from pinecall_loadlab.scenarios.runtime_choosing import place_calls

from .conftest import SHORT


@pytest.fixture
def standin_config(standin_config: StandInConfig) -> StandInConfig:
    """LiveKit's offer window as measured (10 s): an answer 3 s late still gets its job."""
    return dataclasses.replace(standin_config, offer_deadline_s=10.0)


@pytest.fixture
def dispatcher_numbers() -> dict[str, Any]:
    """The seed's re-offer (12 s): an answer 3 s late is not re-offered meanwhile."""
    return SHORT | {"reoffer_s": 12.0}


async def test_offers_waiting_for_their_process_weigh_one_seat_each(chain: Chain) -> None:
    """Three seats, two warm processes, answers 3 s late, three calls 1 s apart: the third
    offer finds two offers reserved. livekit-agents weighed each ``0.7 ÷ 2`` and declined it
    (0.7 is its load threshold) while the dispatcher counted a seat free; each weighs ``0.7 ÷ 3``
    now."""
    a = await chain.worker("three-seats", seats=3)
    chain.lk.slow(a.worker_id, 3.0)
    async with asyncio.timeout(90):
        answered, callers = await place_calls(chain, prefix="slow", calls=3, interval_s=1.0)
    assert [x.by for x in answered] == [a.name] * 3
    for x in answered:
        [ended] = chain.lk.events.of(
            ev.JobRequestEnded, lambda e, r=x.room: e.room == r and e.agent_name == a.name
        )
        assert ended.outcome == "assigned", x.room
    assert [
        len(chain.lk.events.of(ev.DispatchCreated, lambda e, r=x.room: e.room == r))
        for x in answered
    ] == [1, 1, 1]
    for caller in callers:
        await caller.leave()
