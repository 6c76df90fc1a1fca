"""The seeds' capacity and ghost experiments, LiveKit choosing and the runtime choosing side by
side in one run (issue 7, acceptance 1 and 2), on real Postgres and NATS, the stand-in and real
workers."""

from __future__ import annotations

import pytest

from pinecall_loadlab.livekit import StandIn
from pinecall_loadlab.scenarios import experiments
from pinecall_loadlab.scenarios.chain import ChainConfig

pytestmark = pytest.mark.long  # scheduled first (the testing plugin)


def modes(result: object) -> dict[str, experiments.Mode]:
    assert isinstance(result, experiments.Experiment)
    return {m.mode: m for m in result.modes}


async def test_capacity_the_runtime_fills_8_of_8_where_livekit_fills_6_of_8(
    standin: StandIn, chain_config: ChainConfig
) -> None:
    setup = experiments.Setup(lk=standin, config=chain_config, interval_s=0, settle_s=30)
    result = modes(await experiments.run("capacity", setup))
    runtime, livekit = result["runtime_choosing"], result["livekit_choosing"]
    assert (runtime.placed, runtime.answered_by_agent, runtime.answered_by_overflow) == (18, 16, 2)
    assert (runtime.silent, runtime.seats_used, runtime.seats) == (0, 16, 16)
    assert runtime.detail == {"worker_1": 8, "worker_2": 8}
    assert (livekit.placed, livekit.answered_by_agent, livekit.silent) == (18, 12, 6)
    assert livekit.detail == {"worker_1": 6, "worker_2": 6}


async def test_ghost_the_runtime_answers_every_call_where_livekit_loses_some(
    standin: StandIn, chain_config: ChainConfig
) -> None:
    """As the issue states it: two workers, the second's machine gone at the 8th of 16 calls
    placed a second apart, the seed's 12 s (the stand-in's offer deadline is 3 s)."""
    setup = experiments.Setup(lk=standin, config=chain_config, interval_s=1.0, settle_s=60)
    result = modes(await experiments.run("ghost", setup))
    runtime, livekit = result["runtime_choosing"], result["livekit_choosing"]
    assert (runtime.placed, runtime.answered_by_agent, runtime.silent) == (16, 16, 0)
    assert runtime.answered_by_overflow == 0
    gone = runtime.detail["offered_to_ghost_once_gone"]
    assert gone > 0  # offered to it before it was unheard 12 s...
    assert runtime.detail["reoffered_to_the_other"] == gone  # ...and each offered again,
    assert runtime.detail["reoffered_sooner"] == 0  # at the re-offer time, not before
    assert runtime.detail["offered_to_ghost_once_unheard"] == 0
    assert livekit.detail["lost_to_ghost"] > 0
    assert livekit.silent == livekit.detail["lost_to_ghost"]
