"""The lab's experiments (``lab run capacity|ghost|death``, :mod:`pinecall_loadlab.scenarios`)
simulated at their sizes, with their parameters, so the simulator can be checked against the lab.

Each returns, per mode, ``(placed, answered, overflow, silent)`` and the loss counts, the numbers
the lab's table prints. The experiments' workers are fixed (no KEDA, no scaled pods); their calls
last longer than the run (the lab's callers hold their seats until the end).

- **capacity**: two workers of 8 seats, 18 calls one after another (each settled, then 1 s).
- **ghost**: two workers of 16 seats, 16 calls a second apart, the second's machine gone at the 8th.
- **death**: the runtime choosing: workers ``a`` of 6 seats and ``b`` of 8, 4 calls, ``b`` killed;
  LiveKit choosing: 3 calls dispatched to ``a`` alone, ``a`` killed.
"""

from __future__ import annotations

import msgspec
import numpy as np

from pinecall_dispatcher import domain as dispatch
from pinecall_loadlab.simulate.day import Calls
from pinecall_loadlab.simulate.engine import run_mode
from pinecall_loadlab.simulate.params import Fault, Params
from pinecall_loadlab.simulate.report import Totals

HOLD_S = 3600.0
"""The experiments' calls outlast the run."""
SETTLED_S = 3.0
"""A call placed after the last settled: the job's start (2 s) and the lab's second apart."""
EXPERIMENTS = ("capacity", "ghost", "death")


class SimulatedMode(msgspec.Struct, kw_only=True):
    mode: str
    totals: Totals


def _calls(n: int, every_s: float) -> Calls:
    return Calls(at_s=np.arange(n, dtype=float) * every_s + 1.0, length_s=np.full(n, HOLD_S))


def _lab(**changes: object) -> Params:
    """The lab's world: no scaled workers, the lab's offer deadline (10 s) and LiveKit's death
    notice after the stand-in's connection timeout (``lab run --connection-timeout`` 5 s)."""
    base = Params(most=0, core_workers=0, agent_lost_s=5.0)
    return msgspec.structs.replace(base, **changes)


def capacity(seed: int = 1, rules: dispatch.Rules | None = None) -> list[SimulatedMode]:
    """``lab run capacity``: both modes on two workers of 8 seats, 18 calls."""
    calls = _calls(18, SETTLED_S)
    core = [("cap-0", 8), ("cap-1", 8)]
    return [
        SimulatedMode(
            mode=mode,
            totals=run_mode(
                mode, _lab(), calls, seed=seed, core=core, end_s=120.0, rules=rules
            ).totals,
        )
        for mode in ("runtime_choosing", "livekit_choosing")
    ]


def ghost(seed: int = 1) -> list[SimulatedMode]:
    """``lab run ghost``: two workers of 16 seats, 16 calls a second apart, the second's machine
    gone just before the 8th."""
    calls = _calls(16, 1.0)
    gone = Fault(kind="vanish", at_s=float(calls.at_s[7]) - 0.5, worker="ghost-b")
    params = _lab(faults=(gone,), livekit_report="counting")
    core = [("ghost-a", 16), ("ghost-b", 16)]
    return [
        SimulatedMode(
            mode=mode,
            totals=run_mode(mode, params, calls, seed=seed, core=core, end_s=180.0).totals,
        )
        for mode in ("runtime_choosing", "livekit_choosing")
    ]


def death(seed: int = 1) -> list[SimulatedMode]:
    """``lab run death``: the runtime's 4 calls on ``a`` (6) and ``b`` (8), ``b`` killed; LiveKit's
    3 calls on ``a`` alone, ``a`` killed."""
    runtime = run_mode(
        "runtime_choosing",
        _lab(faults=(Fault(kind="kill", at_s=30.0, worker="death-b"),)),
        _calls(4, SETTLED_S),
        seed=seed,
        core=[("death-a", 6), ("death-b", 8)],
        end_s=120.0,
    )
    livekit = run_mode(
        "livekit_choosing",
        _lab(faults=(Fault(kind="kill", at_s=30.0, worker="death-a"),), livekit_report="counting"),
        _calls(3, SETTLED_S),
        seed=seed,
        core=[("death-a", 6)],
        end_s=120.0,
    )
    return [
        SimulatedMode(mode="runtime_choosing", totals=runtime.totals),
        SimulatedMode(mode="livekit_choosing", totals=livekit.totals),
    ]


def simulate_experiment(name: str, seed: int = 1) -> list[SimulatedMode]:
    """The experiment ``name`` (one of :data:`EXPERIMENTS`) simulated."""
    return {"capacity": capacity, "ghost": ghost, "death": death}[name](seed)
