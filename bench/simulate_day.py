"""How long ``lab simulate`` takes for the seeds' day of 50 000 calls, one mode at a time, on one
core (issue 23, "A day of 50 000 calls simulates in under a minute on one core").

Each mode runs in this process alone (SimPy is single-threaded): the CPU seconds of the process
(``time.process_time``) and the wall seconds are printed per mode, with the callers, the events a
second, and ``/proc/loadavg`` before and after (the wall time is the CPU time plus what the
machine's other work took). Not a test: nothing asserts a time.

    .venv/bin/python bench/simulate_day.py [--calls 50000] [--seed 1] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from benchkit import bounded

from pinecall_loadlab.simulate.day import draw_calls, seed_day
from pinecall_loadlab.simulate.engine import MODES, run_mode
from pinecall_loadlab.simulate.params import Params


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=bounded(float, 1, 1_500_000), default=50_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    params = Params()
    calls = draw_calls(
        seed_day(args.calls),
        seed=args.seed,
        mean_s=params.call_mean_s,
        sigma=params.call_sigma,
        max_s=params.call_max_s,
    )
    rows = []
    for mode in MODES:
        before = loadavg()
        cpu, wall = time.process_time(), time.perf_counter()
        result = run_mode(mode, params, calls, seed=args.seed, minutes=False)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        rows.append(
            {
                "mode": mode,
                "callers": len(calls.at_s),
                "cpu_s": round(cpu, 2),
                "wall_s": round(wall, 2),
                "answered": result.totals.answered,
                "loadavg_before": before,
                "loadavg_after": loadavg(),
            }
        )
        print(f"[bench] {mode}: {cpu:.1f} CPU s, {wall:.1f} wall s", file=sys.stderr, flush=True)
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print("mode              callers  CPU s  wall s  loadavg before → after")
    for r in rows:
        print(
            f"{r['mode']:<17} {r['callers']:<8} {r['cpu_s']:<6} {r['wall_s']:<7} "
            f"{r['loadavg_before']} → {r['loadavg_after']}"
        )


if __name__ == "__main__":
    main()
