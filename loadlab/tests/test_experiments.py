"""The seeds' capacity and ghost experiments, LiveKit choosing and the runtime choosing side by
side in one run (issue 7, acceptance 1 and 2), on real Postgres and NATS, the stand-in and real
workers."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from pinecall_loadlab.commands.run import run
from pinecall_loadlab.livekit import StandIn
from pinecall_loadlab.plots import draw_experiment
from pinecall_loadlab.scenarios import experiments
from pinecall_loadlab.scenarios.chain import ChainConfig

pytestmark = pytest.mark.long  # scheduled first (the testing plugin)


def modes(result: object) -> dict[str, experiments.Mode]:
    assert isinstance(result, experiments.Experiment)
    return {m.mode: m for m in result.modes}


def drawn(result: object, path: Path) -> None:
    """``lab run … --plot``'s drawing of ``result`` is a PNG, and each mode's seats over time
    rises to its table's seats used (issue 22, acceptance 6)."""
    assert isinstance(result, experiments.Experiment)
    draw_experiment(result, path)
    assert path.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    for mode in result.modes:
        assert mode.seats_over_time[0] == (0.0, 0)
        assert max(n for _, n in mode.seats_over_time) == mode.seats_used, mode


async def test_capacity_the_runtime_fills_8_of_8_where_livekit_fills_6_of_8(
    standin: StandIn, chain_config: ChainConfig, tmp_path: Path
) -> None:
    setup = experiments.Setup(lk=standin, config=chain_config, interval_s=0, settle_s=30)
    found = await experiments.run("capacity", setup)
    drawn(found, tmp_path / "capacity.png")
    result = modes(found)
    runtime, livekit = result["runtime_choosing"], result["livekit_choosing"]
    assert (runtime.placed, runtime.answered_by_agent, runtime.answered_by_overflow) == (18, 16, 2)
    assert (runtime.silent, runtime.seats_used, runtime.seats) == (0, 16, 16)
    assert runtime.detail == {"worker_1": 8, "worker_2": 8}
    assert (livekit.placed, livekit.answered_by_agent, livekit.silent) == (18, 12, 6)
    assert livekit.detail == {"worker_1": 6, "worker_2": 6}


async def test_ghost_the_runtime_answers_every_call_where_livekit_loses_some(
    standin: StandIn, chain_config: ChainConfig, tmp_path: Path
) -> None:
    """As the issue states it: two workers, the second's machine gone at the 8th of 16 calls
    placed a second apart, the seed's 12 s (the stand-in's offer deadline is 3 s)."""
    setup = experiments.Setup(lk=standin, config=chain_config, interval_s=1.0, settle_s=60)
    found = await experiments.run("ghost", setup)
    drawn(found, tmp_path / "ghost.png")
    result = modes(found)
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


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["death", "--plot", "death.png"], "--plot draws capacity and ghost only"),
        (["capacity", "--plot", "/nowhere/capacity.png"], "/nowhere is not a folder"),
    ],
)
def test_a_plot_of_what_cannot_be_drawn_is_refused_before_anything_runs(
    args: list[str], says: str
) -> None:
    result = CliRunner().invoke(run, args)
    assert result.exit_code == 2
    assert says in result.output
