"""Worker benchmark: first audio and the worker's CPU per call at 2, 4 and 8 concurrent calls; the
control overhead per call (heartbeat, measures, writer); a job process's start with the plugins
preloaded by the forkserver and without (issue 6, acceptance 7). Not a test. From the root::

    .venv/bin/python bench/worker_calls.py [--steps 2,4,8] [--turns 3] [--start-procs 3] [--record]
        [--json]

Set-up (``benchkit.bench_platform``): Postgres and NATS (running or embedded), a database and a
NATS namespace of the run's own, a fleet key, one roster and one call-log replica as processes.
The LiveKit stand-in and the vendor fakes (their default, real-vendor-like latencies) run in this
process, and so do the callers: each is a SIP caller (``sip_call``) offered to the worker as the
dispatcher offers (a CreateDispatch with a JobOffer), saying the recorded question ``--turns``
times, each time waiting for the agent's answer and 0.6 s of quiet, then hanging up. The worker
is ``pinecall-runtime worker start`` in a process of its own (8 seats, lab rooms, the PROCESS
executor): its CPU is its process tree's (``/proc``: the worker, the forkserver, the job
processes), over the time every call of the step is talking (a job process that ended takes
its CPU time out of ``/proc``, so the window closes before the callers hang up), and per call
above the idle worker's CPU (measured first).

First audio, two ways: the worker's (``turn.agent``'s ``first_audio_s`` on the call log, i.e.
livekit-agents' ``e2e_latency``, the minute's measure) and the caller's (from the end of its line
to the first agent audio it hears over the lab transport).

``--record`` (issue 19, acceptance 4): each step twice on the same worker, the calls of an agent
that does not record, then of one that does (the same agent but its ``record``), into moto's S3
server in this process (``worker_recording.py``); the worker's cores and cores a call each way,
and their ratio (the seed's measure: 1.78 → 2.31 cores at six calls). ``/proc/loadavg`` is printed with each
phase: the machine is shared, read the numbers with it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import time
from typing import Any

import worker_recording as recording
from benchkit import Bench, bench_platform, log, self_cpu_s, tree_cpu_s
from worker_control import control_overhead
from worker_start import measure_start

from pinecall_labroom import LabRoom
from pinecall_loadlab.callers import LINES, HangUp, Say, Step, WaitForAgent, play
from pinecall_loadlab.livekit import StandIn, StandInConfig
from pinecall_loadlab.livekit import events as ev
from pinecall_loadlab.livekit.callers import sip_call
from pinecall_loadlab.scenarios.workerprocess import started
from pinecall_loadlab.vendors import Reply, VendorFakes, VendorsConfig
from pinecall_servicekit.platform import ensure_platform, free_port
from pinecall_servicekit.settings import Settings
from pinecall_testkit.worker import CallEvents, of_kind, offer_call, read_log
from pinecall_worker.domain import p95
from pinecall_worker.settings import WorkerSettings

KEY, SECRET = "bench-key", "bench-secret-of-at-least-32-characters"
ANSWER = "Your order arrives on Thursday."
SEATS = 8


def loadavg() -> str:
    with open("/proc/loadavg") as f:
        return f.read().strip()


def quantiles(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"p50": None, "p95": None}
    return {"p50": round(statistics.median(values), 3), "p95": round(p95(values), 3)}


def worker_env(
    bench: Bench, standin: StandIn, fakes: VendorFakes, urls: dict[str, str]
) -> dict[str, str]:
    return bench.env | {
        "PINECALL_FLEET": "pinecall",
        "PINECALL_FLEET_KEY": bench.fleet_key,
        "PINECALL_MAX_JOBS": str(SEATS),
        "PINECALL_WORKER_HOST": "bench",
        "PINECALL_ROSTER_URL": urls["roster"],
        "PINECALL_CALL_LOG_URL": urls["call-log"],
        "PINECALL_LAB_ROOMS": "true",
        "PINECALL_HEALTH_PORT": str(free_port()),
        "PINECALL_MEASURES_SOCKET": str(bench.workdir / "measures.sock"),
        "PINECALL_RELAY_SOCKET": str(bench.workdir / "relay.sock"),
        "PINECALL_DEEPGRAM_URL": fakes.deepgram_url,
        "PINECALL_ANTHROPIC_URL": fakes.anthropic_url,
        "PINECALL_CARTESIA_URL": fakes.cartesia_url,
        "PINECALL_LOG_LEVEL": "WARNING",
        "PINECALL_LOG_FORMAT": "text",
        "LIVEKIT_URL": standin.url,
        "LIVEKIT_API_KEY": KEY,
        "LIVEKIT_API_SECRET": SECRET,
        "DEEPGRAM_API_KEY": "lab",
        "ANTHROPIC_API_KEY": "lab",
        "CARTESIA_API_KEY": "lab",
    }


async def ring(
    standin: StandIn, lk: Any, worker: str, events: CallEvents, name: str, agent: str
) -> LabRoom:
    """A SIP caller offered to ``worker``; returns once the worker opened the call. Calls are
    rung one after another: an idle worker guesses a call's weight as LiveKit's load threshold
    over its warm processes and declines past that many offers in one instant (seed 000,
    "Capacity is counted in calls"), which the dispatcher answers with a re-offer 12 s later."""
    caller = await sip_call(lk, standin.url, KEY, SECRET, room=name, fleet="pinecall")
    await offer_call(lk, worker, room=name, call=name, agent=agent)
    await events.wait("opened", name)
    return caller


async def converse(caller: LabRoom, turns: int) -> list[float]:
    """``turns`` times the question, each time until the agent has answered and been quiet."""
    script: list[Step] = []
    for _ in range(turns):
        script += [Say(line="question"), WaitForAgent(until_quiet_s=0.6, timeout_s=60)]
    return (await play(caller, script)).waits()


async def hang_up(caller: LabRoom, events: CallEvents, name: str) -> None:
    await play(caller, [HangUp()])
    await events.wait("sealed", name)


async def calls_phase(
    bench: Bench, urls: dict[str, str], steps: list[int], turns: int, record: bool
) -> dict[str, Any]:
    """Every step on one worker; with ``record``, each step twice: calls of an agent that does
    not record, then of one that does (``worker_recording``), into moto's bucket."""
    from livekit import api

    standin = StandIn(StandInConfig(keys={KEY: SECRET}, port=0))
    fakes = VendorFakes(VendorsConfig(port=0))  # the fakes' defaults: a real vendor's latencies
    async with (
        standin,
        fakes,
        CallEvents.listening(bench.platform.nats_url, bench.namespace) as events,
    ):
        with contextlib.ExitStack() as stack:
            env = worker_env(bench, standin, fakes, urls)
            if record:
                env |= stack.enter_context(recording.bucket())
                await recording.define_agents(bench, urls["call-log"])
            settings = WorkerSettings.from_env(env)
            lk = api.LiveKitAPI(standin.url, KEY, SECRET)
            try:
                return await _steps(bench, urls, standin, fakes, events, lk, settings,
                                    steps, turns, record)  # fmt: skip
            finally:
                await lk.aclose()


async def _steps(
    bench: Bench, urls: dict[str, str], standin: StandIn, fakes: VendorFakes,
    events: CallEvents, lk: Any, settings: WorkerSettings, steps: list[int], turns: int,
    record: bool,
) -> dict[str, Any]:  # fmt: skip
    # SIGTERM at the end: it drains (no call is left) and exits
    async with started(settings, output=bench.workdir / "worker.log", within_s=180) as w:
        proc = w.proc
        [registered] = standin.events.of(ev.WorkerRegistered, lambda e: "/bench." in e.agent_name)
        log(f"worker {registered.agent_name} ready (pid {proc.pid})")
        cpu0, t0 = tree_cpu_s(proc.pid) or 0.0, time.monotonic()
        # the idle worker: heartbeat, LiveKit's status, warm processes
        await asyncio.sleep(5)
        idle = ((tree_cpu_s(proc.pid) or 0.0) - cpu0) / (time.monotonic() - t0)
        rows = []
        for n in steps:
            for recorded in (False, True) if record else (None,):
                fakes.deepgram.script(*[LINES["question"]] * (n * turns))
                fakes.anthropic.script(*[Reply(text=ANSWER)] * (n * turns))
                before = loadavg()
                tag = {None: "", False: "-off", True: "-on"}[recorded]
                names = [f"bench-{n}{tag}-{i}" for i in range(n)]
                agent = "support-bot" if recorded is None else recording.AGENTS[recorded].name
                async with asyncio.timeout(600):
                    rooms = [
                        await ring(standin, lk, registered.agent_name, events, c, agent)
                        for c in names
                    ]
                    # CPU while every call talks: a job process that ended takes its CPU time
                    # out of /proc with it, so the window closes before anyone hangs up
                    cpu0, t0 = tree_cpu_s(proc.pid) or 0.0, time.monotonic()
                    heard = await asyncio.gather(*(converse(r, turns) for r in rooms))
                    wall = time.monotonic() - t0
                    cores = ((tree_cpu_s(proc.pid) or 0.0) - cpu0) / wall
                    await asyncio.gather(
                        *(hang_up(r, events, c) for r, c in zip(rooms, names, strict=True))
                    )
                e2e, completed = [], 0
                for name in names:
                    entries = await read_log(urls["call-log"], bench.fleet_key, name)
                    e2e += [
                        t["first_audio_s"]
                        for t in of_kind(entries, "turn.agent")
                        if t["first_audio_s"]
                    ]
                    completed += recording.recorded_ok(
                        of_kind(entries, "call.recording"),
                        of_kind(entries, "call.recording_failed"),
                    )
                rows.append(
                    {
                        "calls": n,
                        "recorded": recorded,
                        "recordings_completed": completed,
                        "turns_answered": len(e2e),
                        "turns_said": n * turns,
                        "wall_s": round(wall, 1),
                        "worker_cores": round(cores, 3),
                        "cores_per_call": round(cores / n, 3),
                        "cores_per_call_above_idle": round((cores - idle) / n, 3),
                        "first_audio_worker_s": quantiles(e2e),
                        "first_audio_caller_s": quantiles([w for ws in heard for w in ws]),
                        "loadavg_before": before,
                        "loadavg_after": loadavg(),
                    }
                )
                log(f"{n} calls: {rows[-1]}")
        found: dict[str, Any] = {"idle_worker_cores": round(idle, 3), "steps": rows}
        if record:
            found["recording"] = recording.compare(rows)
        return found


def table(report: dict[str, Any]) -> str:
    lines = [f"loadavg at start: {report['loadavg']}  ({report['cpus']} cpus)", ""]
    lines.append(f"idle worker: {report['calls']['idle_worker_cores']} cores")
    lines.append(
        f"calls{'  rec' if 'recording' in report['calls'] else ''}  turns  wall s  worker cores  /call  /call>idle  e2e p50  e2e p95  heard p50  heard p95  loadavg before → after"
    )
    for r in report["calls"]["steps"]:
        w, c = r["first_audio_worker_s"], r["first_audio_caller_s"]
        rec = {None: "", False: "  off", True: "   on"}[r["recorded"]]
        lines.append(
            f"{r['calls']:>5}{rec}  {r['turns_answered']:>2}/{r['turns_said']:<2}  {r['wall_s']:>6}  "
            f"{r['worker_cores']:>12}  {r['cores_per_call']:>5}  {r['cores_per_call_above_idle']:>10}  "
            f"{w['p50']!s:>7}  {w['p95']!s:>7}  {c['p50']!s:>9}  {c['p95']!s:>9}  "
            f"{r['loadavg_before']} → {r['loadavg_after']}"
        )
    if "recording" in report["calls"]:
        lines += recording.lines(report["calls"]["recording"])
    o = report["control"]
    lines += ["", f"control overhead: {o['cores_per_call']} cores per call ({o['detail']})", ""]
    for mode, s in report["start"].items():
        lines.append(
            f"job process start, {mode:>9}: {s['start_s']} s to ready (import {s['import_s']} s, "
            f"silero {s['vad_s']} s), over {s['procs']} processes; loadavg {s['loadavg']}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--steps", default="2,4,8", help="concurrent calls of each step")
    parser.add_argument("--turns", type=int, default=3, help="turns of each call")
    parser.add_argument("--start-procs", type=int, default=3, help="job processes per start mode")
    parser.add_argument(
        "--record",
        action="store_true",
        help="run each step twice: without recording, then with (the ratio of cores)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of the table")
    args = parser.parse_args(argv)
    steps = [int(s) for s in args.steps.split(",")]
    if max(steps) > SEATS:
        parser.error(f"at most {SEATS} concurrent calls (the worker's seats)")
    report: dict[str, Any] = {"loadavg": loadavg(), "cpus": os.cpu_count()}
    settings = Settings.from_env()
    with (
        ensure_platform(settings.database_url, settings.nats_url) as platform,
        bench_platform(platform) as bench,
    ):
        bench.env["PINECALL_LOG_TOKEN_SECRET"] = "the worker benchmark's"
        urls = {
            "roster": bench.start_replica("roster"),
            "call-log": bench.start_replica("call-log", "call-log"),
        }
        report["calls"] = asyncio.run(calls_phase(bench, urls, steps, args.turns, args.record))
        report["control"] = asyncio.run(control_overhead(bench, urls["roster"], urls["call-log"]))
    report["start"] = {
        mode: measure_start(mode, args.start_procs, loadavg) for mode in ("preloaded", "lazy")
    }
    report["bench_cpu_s"] = round(self_cpu_s(), 1)
    print(json.dumps(report, indent=2) if args.json else table(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
