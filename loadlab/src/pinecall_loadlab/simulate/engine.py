"""A run on SimPy's virtual clock: the callers arrive, a dispatcher places them, the cluster
sizes itself, faults strike, and each minute is written down.

:func:`run_mode` is one dispatcher over given callers; :func:`simulate_day` runs both on the
same callers (the same arrivals and call lengths, the same node delays drawn from the same seed).
"""

from __future__ import annotations

import math
from collections.abc import Generator
from typing import Any

import numpy as np
import simpy

from pinecall_dispatcher import domain as dispatch
from pinecall_loadlab.simulate.choosing import Choosing, LivekitChoosing, RuntimeChoosing
from pinecall_loadlab.simulate.cluster import Cluster
from pinecall_loadlab.simulate.day import Calls, Day, draw_calls
from pinecall_loadlab.simulate.params import Params
from pinecall_loadlab.simulate.report import DayResult, Ledger, Minute, ModeResult
from pinecall_loadlab.simulate.workers import seats_running

MODES = ("livekit_choosing", "runtime_choosing")
DAY_S = 86_400.0
Proc = Generator[simpy.Event, Any, None]


def core_of(params: Params) -> list[tuple[str, int]]:
    """The core node's workers: ``(host, seats)`` each (chart ``workers.core``)."""
    return [(f"worker-core-{i}", params.core_seats) for i in range(params.core_workers)]


def run_mode(
    mode: str,
    params: Params,
    calls: Calls,
    *,
    seed: int,
    core: list[tuple[str, int]] | None = None,
    end_s: float | None = None,
    rules: dispatch.Rules | None = None,
    minutes: bool = True,
) -> ModeResult:
    """Run ``calls`` through one dispatcher (``mode``, one of :data:`MODES`) until ``end_s``
    (default: the day and the longest call after it)."""
    if mode not in MODES:
        raise ValueError(f"mode {mode!r} is not one of {', '.join(MODES)}")
    end = end_s if end_s is not None else DAY_S + params.call_max_s + 120.0
    env = simpy.Environment()
    ledger = Ledger(len(calls.at_s), math.ceil(end / 60))
    chooser: Choosing
    if mode == "runtime_choosing":
        chooser = RuntimeChoosing(env, params, calls.length_s, ledger, rules)
        status = None
    else:
        chooser = LivekitChoosing(env, params, calls.length_s, ledger, seed)
        status = chooser.livekit_status
    cluster = Cluster(
        env,
        params,
        np.random.default_rng([seed, 1]),
        core=core if core is not None else core_of(params),
        on_lost=chooser.lost,
        livekit_status=status,
    )
    chooser.cluster = cluster
    env.process(_arrivals(env, calls.at_s, chooser, ledger))
    lost: list[float] = []
    env.process(_faults(env, params, cluster, lost))
    rows: list[Minute] = []
    env.process(_sampler(env, cluster, chooser, ledger, rows))
    env.run(until=end)
    return _result(mode, ledger, rows if minutes else [], rows, nodes_lost=len(lost))


def _arrivals(env: simpy.Environment, at_s: np.ndarray, chooser: Choosing, ledger: Ledger) -> Proc:
    for idx, at in enumerate(at_s.tolist()):
        if at > env.now:
            yield env.timeout(at - env.now)
        ledger.count("arrived", env.now)
        chooser.ring(idx)


def _faults(env: simpy.Environment, params: Params, cluster: Cluster, lost: list[float]) -> Proc:
    """Strike each fault of ``params`` at its time; ``lost`` gets the time of each node lost."""
    for fault in sorted(params.faults, key=lambda f: f.at_s):
        if fault.at_s > env.now:
            yield env.timeout(fault.at_s - env.now)
        if fault.kind == "node_lost" and cluster.node_lost():
            lost.append(env.now)
        elif fault.kind == "release":
            cluster.release()
        elif fault.kind in ("kill", "vanish"):
            host = f"{params.fleet}/{fault.worker}."
            for w in [w for w in cluster.live() if w.name.startswith(host) and not w.gone]:
                (cluster.kill if fault.kind == "kill" else cluster.vanish)(w)


def _sampler(
    env: simpy.Environment, cluster: Cluster, chooser: Choosing, ledger: Ledger, rows: list[Minute]
) -> Proc:
    while True:
        yield env.timeout(60.0)
        m = int(env.now // 60) - 1
        live = cluster.live()
        seats, used = seats_running(live)
        c = ledger.counts
        rows.append(
            Minute(
                minute=m,
                arrived=int(c["arrived"][m]),
                calls=sum(w.active for w in live if not w.gone),
                seats=seats,
                used=used,
                free=seats - used,
                wanted=cluster.wanted,
                scaled_running=sum(w.scaled and w.registered and not w.gone for w in live),
                scaled_pods=sum(w.scaled and not w.gone for w in live),
                nodes=len(cluster.nodes),
                waiting=chooser.waiting(),
                reoffers=int(c["reoffers"][m]),
                overflow=int(c["overflow"][m]),
                silent=int(c["silent"][m]),
                lost=int(c["lost"][m]),
                sentenced=int(c["sentenced"][m]),
            )
        )


def _result(
    mode: str, ledger: Ledger, shown: list[Minute], rows: list[Minute], *, nodes_lost: int
) -> ModeResult:
    totals = ledger.totals()
    return ModeResult(
        mode=mode,
        totals=totals,
        pod_hours=round(sum(r.scaled_pods for r in rows) / 60, 2),
        node_hours=round(sum(r.nodes for r in rows) / 60, 2),
        peak_calls=max((r.calls for r in rows), default=0),
        overflow_share=round(totals.overflow / totals.placed, 6) if totals.placed else 0.0,
        nodes_lost=nodes_lost,
        minutes=shown,
    )


def simulate_day(
    day: Day,
    params: Params,
    *,
    seed: int = 1,
    modes: tuple[str, ...] = MODES,
    minutes: bool = True,
) -> DayResult:
    """The day's callers (bursts of ``params.faults`` added) through each dispatcher of
    ``modes``, on the same callers and the same seed."""
    extra = [(f.at_s, f.calls_per_min, f.minutes) for f in params.faults if f.kind == "burst"]
    calls = draw_calls(
        day,
        seed=seed,
        mean_s=params.call_mean_s,
        sigma=params.call_sigma,
        max_s=params.call_max_s,
        extra=extra,
    )
    results = [run_mode(m, params, calls, seed=seed, minutes=minutes) for m in modes]
    return DayResult(seed=seed, callers=len(calls.at_s), modes=results)
