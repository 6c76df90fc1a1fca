"""The capacity and ghost experiments drawn (issue 22, "Plots"): ``lab run capacity|ghost
--plot FILE.png``.

One PNG, matplotlib's Agg backend (no display): the seats used over each mode's run, LiveKit
choosing beside the runtime choosing, from :attr:`Mode.seats_over_time
<pinecall_loadlab.scenarios.experiments.Mode.seats_over_time>`, with the fleet's seats as a line.
Nothing is measured here: the plot says what the table says, over time.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import matplotlib

matplotlib.use("Agg")
from matplotlib.figure import Figure  # after the backend is chosen

if TYPE_CHECKING:
    from pinecall_loadlab.scenarios.experiments import Experiment

DPI = 80
"""Pixels per inch: 8 × 4 inches is 640 × 320 pixels, small enough to commit."""

LABELS = {"runtime_choosing": "the runtime choosing", "livekit_choosing": "LiveKit choosing"}


def draw_experiment(result: Experiment, path: Path) -> None:
    """``result``'s seats used over time, one step line per mode, to a PNG at ``path``; each
    line ends at the mode's last change (the table's ``seats used`` is its height there)."""
    fig = Figure(figsize=(8, 4), dpi=DPI, layout="constrained")
    ax = fig.subplots()
    for mode in result.modes:
        points = mode.seats_over_time or [(0.0, 0)]
        label = (
            f"{LABELS.get(mode.mode, mode.mode)}: {mode.answered_by_agent} by an agent, "
            f"{mode.answered_by_overflow} by the overflow, {mode.silent} silent"
        )
        ax.step([t for t, _ in points], [n for _, n in points], where="post", label=label)
    seats = max((m.seats for m in result.modes), default=0)
    if seats:
        ax.axhline(seats, linestyle=":", color="grey", label=f"the fleet's {seats} seats")
    ax.set_title(f"{result.experiment}: seats used over time")
    ax.set_xlabel("seconds since the mode's first call")
    ax.set_ylabel("seats used")
    ax.set_ylim(bottom=0, top=seats + 2 if seats else None)
    ax.legend(loc="lower right")
    fig.savefig(path)
