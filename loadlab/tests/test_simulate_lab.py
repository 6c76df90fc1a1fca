"""The simulator against the lab run for real: ``lab run capacity`` and ``ghost`` on the
stand-in with real workers, the same experiments simulated (tolerance as
``test_simulate_agreement.py`` states it)."""

from __future__ import annotations

import numpy as np
import pytest

from pinecall_loadlab.livekit import StandIn
from pinecall_loadlab.scenarios import experiments
from pinecall_loadlab.scenarios.chain import ChainConfig
from pinecall_loadlab.simulate import experiments as simulated

pytestmark = pytest.mark.long


def lab_rows(found: object) -> dict[str, tuple[int, int, int, int]]:
    assert isinstance(found, experiments.Experiment)
    return {
        m.mode: (m.placed, m.answered_by_agent, m.answered_by_overflow, m.silent)
        for m in found.modes
    }


def sim_rows(modes: list[simulated.SimulatedMode]) -> dict[str, tuple[int, int, int, int]]:
    return {
        m.mode: (m.totals.placed, m.totals.answered, m.totals.overflow, m.totals.silent)
        for m in modes
    }


async def test_capacity_lab_and_simulator_agree(
    standin: StandIn, chain_config: ChainConfig
) -> None:
    setup = experiments.Setup(lk=standin, config=chain_config, interval_s=0, settle_s=30)
    assert lab_rows(await experiments.run("capacity", setup)) == sim_rows(simulated.capacity())


async def test_ghost_lab_and_simulator_agree(standin: StandIn, chain_config: ChainConfig) -> None:
    setup = experiments.Setup(lk=standin, config=chain_config, interval_s=1.0, settle_s=60)
    lab = lab_rows(await experiments.run("ghost", setup))
    sim = [sim_rows(simulated.ghost(seed)) for seed in range(200)]
    assert lab["runtime_choosing"] == sim[0]["runtime_choosing"]
    silent = np.array([s["livekit_choosing"][3] for s in sim])
    low, high = np.percentile(silent, [2, 98])
    assert low <= lab["livekit_choosing"][3] <= high, (lab, low, high)
