"""What a simulated day says: each caller's fate, the minute's counts, the day's totals.

A caller is **answered** (an agent opened the call), sent to the **overflow** (its sentence and a
call back, no agent), or **silent** (nobody answered: LiveKit's 0.7 line, a draw to a ghost, a job
that failed). An answered call whose worker was lost is **lost**: it then hears the **sentence**
(the runtime's death handler) or nothing (**silent after the loss**, LiveKit choosing); one still
held when its draining worker's ten minutes ran out is **cut**.
"""

from __future__ import annotations

import msgspec
import numpy as np

FATES = ("ringing", "agent", "overflow", "silent", "lost", "lost_silent", "sentenced", "cut")
_CODE = {f: i for i, f in enumerate(FATES)}
COUNTED = ("arrived", "answered", "overflow", "silent", "reoffers", "lost", "sentenced", "cut")
_COUNT_OF = {
    "agent": "answered",
    "overflow": "overflow",
    "silent": "silent",
    "lost": "lost",
    "lost_silent": "lost",
    "sentenced": "sentenced",
    "cut": "cut",
}


class Ledger:
    """Each caller's fate (in arrival order) and the counts of each minute."""

    def __init__(self, callers: int, minutes: int) -> None:
        self.fates = np.zeros(callers, dtype=np.int8)
        self.answered = np.zeros(callers, dtype=bool)
        self.minutes = minutes
        self.counts = {k: np.zeros(minutes, dtype=np.int64) for k in (*COUNTED, "to_ghost")}

    def count(self, what: str, now: float) -> None:
        self.counts[what][min(int(now // 60), self.minutes - 1)] += 1

    def fate(self, idx: int, fate: str, now: float) -> None:
        if idx < 0:
            return
        self.fates[idx] = _CODE[fate]
        if fate == "agent":
            self.answered[idx] = True
        self.count(_COUNT_OF[fate], now)

    def totals(self) -> Totals:
        n = {f: int(np.count_nonzero(self.fates == _CODE[f])) for f in FATES}
        return Totals(
            placed=len(self.fates),
            answered=int(self.answered.sum()),
            overflow=n["overflow"],
            silent=n["silent"],
            lost=n["lost"] + n["lost_silent"] + n["sentenced"],
            sentenced=n["sentenced"],
            silent_after_loss=n["lost_silent"] + n["lost"],
            cut=n["cut"],
            ringing=n["ringing"],
        )


class Totals(msgspec.Struct, kw_only=True):
    """The day's callers: placed = answered + overflow + silent + ringing."""

    placed: int
    answered: int
    overflow: int
    silent: int
    lost: int
    """Answered, then their worker lost."""
    sentenced: int
    """Of the lost, those who heard the sentence."""
    silent_after_loss: int
    """Of the lost, those who heard nothing after it."""
    cut: int
    """Answered, still talking when their worker's drain ran out."""
    ringing: int
    """Still in offers when the run ended (0 when it ran long enough)."""


class Minute(msgspec.Struct, kw_only=True, array_like=False):
    minute: int
    arrived: int
    calls: int
    """Calls at once: held by workers at the minute's end."""
    seats: int
    """Seats running: of the workers LiveKit holds, not draining."""
    used: int
    free: int
    wanted: int
    scaled_running: int
    """Scaled workers LiveKit holds (draining ones included: a release drains many at once)."""
    scaled_pods: int
    """Scaled pods that exist (waiting for a node, starting, running, draining)."""
    nodes: int
    """Worker-pool nodes (up or provisioning)."""
    waiting: int
    """Rings in offers not opened yet (LiveKit choosing: jobs offered, not assigned)."""
    reoffers: int
    overflow: int
    silent: int
    lost: int
    sentenced: int


class ModeResult(msgspec.Struct, kw_only=True):
    mode: str
    totals: Totals
    pod_hours: float
    """Scaled pods × hours, over the run (each minute's count ÷ 60)."""
    node_hours: float
    peak_calls: int
    overflow_share: float
    """The day's callers sent to the overflow, as a share of those placed."""
    nodes_lost: int = 0
    """Scaled workers' nodes the ``node_lost`` faults found to lose (none up then: 0)."""
    minutes: list[Minute] = msgspec.field(default_factory=list)


class DayResult(msgspec.Struct, kw_only=True):
    seed: int
    callers: int
    modes: list[ModeResult]


def day_table(result: DayResult) -> str:
    """The day's totals, a row per mode, as ``lab simulate`` prints them."""
    from pinecall_servicekit.operator import table

    headers = (
        "mode", "placed", "answered", "overflow", "silent", "lost", "sentenced",
        "silent after loss", "cut", "peak calls", "pod-hours", "node-hours",
    )  # fmt: skip
    rows = [
        (
            m.mode,
            m.totals.placed,
            m.totals.answered,
            m.totals.overflow,
            m.totals.silent,
            m.totals.lost,
            m.totals.sentenced,
            m.totals.silent_after_loss,
            m.totals.cut,
            m.peak_calls,
            f"{m.pod_hours:.1f}",
            f"{m.node_hours:.1f}",
        )
        for m in result.modes
    ]
    return table(headers, rows)
