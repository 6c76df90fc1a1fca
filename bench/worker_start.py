"""How long a worker's job process takes to start, with its plugins preloaded by the forkserver or
imported by each process (seed 000, "Capacity is counted in calls": 3–5 s before, 0.1 s after).

Run by ``worker_calls.py`` as a child of its own, once per mode; not a test::

    PYTHONPATH=bench .venv/bin/python bench/worker_start.py preloaded|lazy PROCS OUT

* ``preloaded``: what ``worker start`` does — ``pinecall_worker.call`` (every vendor plugin) is
  imported in the worker's process before the AgentServer starts, so livekit-agents hands the
  plugins to ``set_forkserver_preload`` and every job process is forked with them in memory;
* ``lazy``: the worker's process never imports them; each job process imports them itself when
  its setup runs (what the seed measured before the fix).

The worker starts ``PROCS`` warm job processes (livekit-agents' ``num_idle_processes``) and never
registers (LiveKit's URL answers nothing: registration does not change a process's start). Each
process appends one JSON line to ``OUT``: ``{mode, start_s, import_s, vad_s}`` — ``start_s``
from the process's creation (the fork, ``/proc/self/stat``) to ready for a call (its setup done: the
plugins imported and silero's model loaded), ``import_s`` the import of the call module alone,
``vad_s`` silero's model load (the same in both modes). The
functions live here, importable by the job processes (``PYTHONPATH=bench``).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

OUT_ENV = "BENCH_START_OUT"
"""Where each job process writes its line (read by the job process from its environment)."""


def age_s() -> float:
    """Seconds since this process was created (forked): now on the boot clock minus its start
    in ``/proc/self/stat`` (clock ticks since boot, 10 ms)."""
    with open("/proc/self/stat") as stat:
        started = int(stat.read().rsplit(")", 1)[1].split()[19])
    return time.clock_gettime(time.CLOCK_BOOTTIME) - started / os.sysconf("SC_CLK_TCK")


def timed_prewarm(proc: Any) -> None:
    """The worker's prewarm, timed: imports the call module (a no-op when preloaded) first."""
    began = time.time()
    from pinecall_worker.call import prewarm  # every vendor plugin, unless the forkserver has them

    imported = time.time()
    prewarm(proc)
    ready = time.time()
    line = {
        "mode": os.environ.get("BENCH_START_MODE", "?"),
        "start_s": round(age_s(), 3),
        "import_s": round(imported - began, 3),
        "vad_s": round(ready - imported, 3),
    }
    with open(os.environ[OUT_ENV], "a") as out:
        out.write(json.dumps(line) + "\n")


async def entrypoint(ctx: Any) -> None:
    """The worker's entrypoint, imported only when a job runs (none does here)."""
    from pinecall_worker.call import entrypoint as answer

    await answer(ctx)


def _written(out: Path) -> int:
    return len(out.read_text().splitlines()) if out.exists() else 0


async def run(mode: str, procs: int, out: Path) -> None:
    from livekit.agents import JobExecutorType

    from pinecall_servicekit.platform import free_port
    from pinecall_worker.server import Worker
    from pinecall_worker.settings import WorkerSettings

    if mode == "preloaded":
        import pinecall_worker.call  # noqa: F401  (the plugins, before the AgentServer starts)
    os.environ[OUT_ENV] = str(out)
    os.environ["BENCH_START_MODE"] = mode
    settings = WorkerSettings.from_env(
        {},
        livekit_url=f"ws://127.0.0.1:{free_port()}",  # nobody: the worker never registers
        livekit_api_key="bench",
        livekit_api_secret="bench-secret-of-at-least-32-characters",
        max_jobs=procs,
        health_port=0,
        heartbeat_s=3600,
        roster_url=f"http://127.0.0.1:{free_port()}",
        log_level="ERROR",
    )
    worker = Worker(
        settings,
        entrypoint,
        prewarm=timed_prewarm,
        executor=JobExecutorType.PROCESS,
        num_idle_processes=procs,
        plugins=frozenset(),
        # what `worker start` preloads, its entrypoint being that module's (here it is ours)
        preload=("pinecall_worker.call",) if mode == "preloaded" else (),
    )
    running = asyncio.create_task(worker.run())
    deadline = time.monotonic() + 180
    while _written(out) < procs:
        if running.done() or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.2)  # the job processes say nothing else to this process
    worker.stop()
    await running


if __name__ == "__main__":
    asyncio.run(run(sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])))


def measure_start(mode: str, procs: int, loadavg: Any) -> dict[str, Any]:
    """Run this module as a worker of ``mode`` in a child process; the median of its ``procs``
    job processes' lines. ``loadavg()`` is read before the child starts."""
    import statistics
    import subprocess
    import tempfile

    here = Path(__file__).resolve().parent
    before = loadavg()
    with tempfile.TemporaryDirectory(prefix="pinecall-bench-start-") as tmp:
        out = Path(tmp) / "start.jsonl"
        env = {k: v for k, v in os.environ.items() if not k.startswith("PINECALL_")}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(here), env.get("PYTHONPATH")]))
        subprocess.run(
            [sys.executable, str(here / "worker_start.py"), mode, str(procs), str(out)],
            env=env,
            check=True,
            capture_output=True,
            timeout=300,
        )
        lines = [json.loads(line) for line in out.read_text().splitlines()]
    return {
        "procs": len(lines),
        **{
            k: round(statistics.median(x[k] for x in lines), 3)
            for k in ("start_s", "import_s", "vad_s")
        },
        "each": lines,
        "loadavg": before,
    }
