"""Acceptance 4 and 5: the seeds' capacity and ghost experiments with LiveKit choosing."""

from __future__ import annotations

import asyncio

import pytest
from livekit import api

from pinecall_loadlab.livekit import StandIn
from pinecall_loadlab.livekit.labagents import LoadReport
from pinecall_loadlab.livekit.testing import LabWorkers
from pinecall_loadlab.scenarios.livekit_choosing import place_calls

pytestmark = pytest.mark.long  # scheduled first (the testing plugin)


@pytest.mark.parametrize(
    ("report", "taken"), [(LoadReport.CALLS_OVER_SEATS, 6), (LoadReport.COUNTED, 8)]
)
async def test_capacity_a_worker_of_8_seats_takes_6_or_8_calls(
    standin: StandIn,
    lab_workers: LabWorkers,
    livekit_api: api.LiveKitAPI,
    report: LoadReport,
    taken: int,
) -> None:
    """`calls ÷ seats` crosses LiveKit's 0.7 load threshold after the 6th call: the 7th and 8th
    are declined (or gated) and lost. `0.7 × calls ÷ seats` reaches 0.7 only with all 8 seats taken."""
    await lab_workers.start(agent_name=f"cap-{report.name}", seats=8, report=report)
    async with asyncio.timeout(60):
        calls = await place_calls(
            standin, livekit_api, agent_name=f"cap-{report.name}", calls=8, interval_s=1.0
        )
    assert [c.answered for c in calls] == [True] * taken + [False] * (8 - taken)
    assert all(c.outcome in ("exhausted", "no_servers") for c in calls[taken:])


async def test_ghost_the_calls_offered_to_a_frozen_worker_are_lost(
    standin: StandIn, lab_workers: LabWorkers, livekit_api: api.LiveKitAPI
) -> None:
    """Two workers of 8 seats; the first is frozen as the 8th of 16 calls is placed. LiveKit keeps
    it listed with its last load and keeps drawing it; each offer to it waits out the deadline and
    is never retried elsewhere: no agent ever joins those rooms."""
    ghost = await lab_workers.start(agent_name="ghost-exp", seats=8)
    await lab_workers.start(agent_name="ghost-exp", seats=8)
    ghosts: set[str] = set()

    async def freeze_at_8th(i: int) -> None:
        if i == 7:
            standin.freeze(ghost)
            ghosts.add(ghost)

    async with asyncio.timeout(90):
        calls = await place_calls(
            standin,
            livekit_api,
            agent_name="ghost-exp",
            calls=16,
            interval_s=1.0,
            ghosts=ghosts,
            before_call=freeze_at_8th,
        )
    haunted = [c for c in calls[7:] if ghost in c.offered_to]
    assert haunted, "the seeded draw offers the ghost at least one call"
    for c in haunted:
        assert c.offered_to == [ghost]  # one offer, no retry on the healthy worker
        assert (c.outcome, c.answered) == ("timeout", False)
        [d] = [
            x
            for x in await livekit_api.agent_dispatch.list_dispatch(c.room)
            if x.agent_name == "ghost-exp"
        ]
        assert list(d.state.jobs) == []  # and the dispatch stays without a job
    assert all(c.answered for c in calls if ghost not in c.offered_to and c.outcome == "assigned")
    workers = {w.id: w for w in standin.dispatcher.registry.all()}
    assert ghost in workers  # still listed
