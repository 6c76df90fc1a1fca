"""A simulated day drawn on one page (``lab simulate --plot FILE.png``): matplotlib's Agg backend.

Top, the whole day: calls at once and seats running per mode; the scaled pods wanted, running and
the nodes; the callers a minute sent to the overflow and left silent. Below, zoomed: the morning
ramp, and 40 minutes around each fault (a release, a node lost, a burst). Nothing is computed
here: the plot draws the per-minute rows the JSON holds.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
from matplotlib.axes import Axes  # after the backend is chosen
from matplotlib.figure import Figure

from pinecall_loadlab.plots import DPI, LABELS
from pinecall_loadlab.simulate.params import Fault
from pinecall_loadlab.simulate.report import DayResult, ModeResult

COLOURS = {"runtime_choosing": "tab:blue", "livekit_choosing": "tab:orange"}


def _hours(mode: ModeResult, lo: int = 0, hi: int | None = None) -> list[float]:
    return [r.minute / 60 for r in mode.minutes[lo:hi]]


def _calls_and_seats(ax: Axes, result: DayResult, lo: int = 0, hi: int | None = None) -> None:
    for m in result.modes:
        c = COLOURS.get(m.mode)
        rows = m.minutes[lo:hi]
        ax.plot(
            _hours(m, lo, hi), [r.calls for r in rows], color=c, label=f"calls, {LABELS[m.mode]}"
        )
        ax.plot(_hours(m, lo, hi), [r.seats for r in rows], color=c, linestyle=":", label="seats")
    ax.set_ylabel("calls / seats")


def _lost(ax: Axes, result: DayResult, lo: int = 0, hi: int | None = None) -> None:
    for m in result.modes:
        c = COLOURS.get(m.mode)
        rows = m.minutes[lo:hi]
        ax.plot(
            _hours(m, lo, hi),
            [r.overflow for r in rows],
            color=c,
            label=f"overflow, {LABELS[m.mode]}",
        )
        silent = [r.silent + (r.lost - r.sentenced) for r in rows]
        ax.plot(_hours(m, lo, hi), silent, color=c, linestyle="--", label="silent")
    ax.set_ylabel("callers a minute")


def _windows(faults: tuple[Fault, ...], first_busy: int) -> list[tuple[str, int, int]]:
    out = [("the morning ramp", first_busy, first_busy + 180)]
    for f in faults:
        start = int(f.at_s // 60)
        out.append(
            (
                f"{f.kind.replace('_', ' ')} at {start // 60:02d}:{start % 60:02d}",
                start - 10,
                start + 30,
            )
        )
    return out[:4]


def draw_day(result: DayResult, faults: tuple[Fault, ...], path: Path) -> None:
    """``result`` on one page, to a PNG at ``path`` (see the module's docstring)."""
    fig = Figure(figsize=(14, 13), dpi=DPI, layout="constrained")
    grid = fig.add_gridspec(5, 4)
    top = fig.add_subplot(grid[0, :])
    _calls_and_seats(top, result)
    top.set_title(f"a simulated day: {result.callers} callers (seed {result.seed})")
    top.legend(loc="upper right", fontsize="small", ncols=2)
    pods = fig.add_subplot(grid[1, :], sharex=top)
    base = result.modes[-1]
    pods.plot(_hours(base), [r.wanted for r in base.minutes], label="wanted (KEDA)")
    pods.plot(
        _hours(base), [r.scaled_running for r in base.minutes], label="scaled workers running"
    )
    pods.plot(_hours(base), [r.nodes for r in base.minutes], linestyle=":", label="nodes")
    pods.set_ylabel(f"pods ({LABELS[base.mode]})")
    pods.legend(loc="upper right", fontsize="small")
    lost = fig.add_subplot(grid[2, :], sharex=top)
    _lost(lost, result)
    lost.set_xlabel("hour of the day (UTC)")
    lost.legend(loc="upper right", fontsize="small", ncols=2)
    first = next((r.minute for r in base.minutes if r.arrived), 0)
    for i, (title, lo, hi) in enumerate(_windows(faults, first)):
        lo = max(0, lo)
        ax = fig.add_subplot(grid[3, i])
        _calls_and_seats(ax, result, lo, hi)
        ax.set_title(title, fontsize="small")
        ax2 = fig.add_subplot(grid[4, i], sharex=ax)
        _lost(ax2, result, lo, hi)
        ax2.set_xlabel("hour")
    fig.savefig(path)
