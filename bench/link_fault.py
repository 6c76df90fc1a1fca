"""A worker LiveKit no longer holds, or one whose answers come late, while callers ring (issue 14,
items 7 and 6 (a)). Not a test: a script that starts its own small platform, measures, prints,
and cleans up after itself::

    .venv/bin/python bench/link_fault.py [--fault cut|hang|slow] [--calls 8] [--interval 1]
                                         [--down 45] [--delay 4] [--seats 3]
                                         [--light] [--keep-logs DIR] [--json]

What it sets up (``pinecall_loadlab.scenarios``, as ``lab run death`` does): the running Postgres
and NATS (or embedded ones) with a database and a namespace of the run's own; the LiveKit stand-in
(its measured 10 s offer deadline); the chain (roster, webhook-ingest, the dispatcher with the
seed's numbers: re-offer at 12 s, heard 12 s; call-log) and two worker processes
(``pinecall-runtime worker start``, the real ``answer`` job on the vendor fakes): ``lost`` of 12
seats, the dispatcher's first choice (the most seats free), and ``held`` of 10.

What it measures: ``lost``'s link to LiveKit is cut and kept down (``--fault cut``: its socket
dropped, its reconnects refused) or hung (``--fault hang``: LiveKit's side reads and sends
nothing) for ``--down`` seconds, and at once ``--calls`` SIP callers ring ``--interval`` seconds
apart, the first at the fault. Each caller waits for its agent, says one question and listens.
Reported per caller: the seconds from its ring (its join) to the agent joining and to the agent's
first audio it heard (the question takes about 1.4 s of that), who answered, and how many
callers were offered to ``lost`` (a CreateDispatch to its name).

``--fault slow`` (item 6 (a)): one worker alone, ``lost`` of ``--seats`` seats (3), whose every
answer to LiveKit's availability request reaches LiveKit ``--delay`` seconds late (4): the
callers ``--interval`` apart (2) must each get a seat it has, none waiting out the 12 s re-offer
and none sent to the overflow while it has a seat free. ``--light`` runs the workers in
this process instead (``chain.worker``: the THREAD executor, jobs that only join their room):
ring to answer only, without the job processes' start, which on a loaded machine keeps
livekit-agents' warm-process gate shut for seconds (issue 14, item 6) and hides this measure.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import shutil
import time
from pathlib import Path
from typing import Any

from benchkit import bounded

from pinecall_loadlab.callers import LINES, Say, Step, WaitForAgent, WaitForAnswer, play
from pinecall_loadlab.livekit import events as ev
from pinecall_loadlab.livekit.callers import sip_call
from pinecall_loadlab.scenarios.chain import chain_call_log, runtime_chain
from pinecall_loadlab.scenarios.lab import lab_platform
from pinecall_loadlab.scenarios.labworkers import start_process
from pinecall_loadlab.scenarios.runtime_choosing import RING
from pinecall_loadlab.vendors import Reply, VendorFakes, VendorsConfig

SCRIPT: list[Step] = [
    WaitForAnswer(timeout_s=60),
    Say(line="question"),
    WaitForAgent(until_quiet_s=0.5, timeout_s=60),
]


def _copy_logs(source: Path, to: Path) -> None:
    to.mkdir(parents=True, exist_ok=True)
    for log in source.glob("*.log"):
        shutil.copy(log, to / log.name)


async def one_caller(chain: Any, i: int, light: bool) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    room = f"lf-{i + 1}"
    rang = loop.time()
    caller = await sip_call(
        chain.livekit,
        chain.lk.url,
        chain.config.api_key,
        chain.config.api_secret,
        room=room,
        fleet="pinecall",
        phone=f"+1777{i:06d}",
        metadata=RING,
    )
    try:
        log = await play(caller, SCRIPT[:1] if light else SCRIPT)
    except Exception as exc:  # a caller nobody answers: said in the report, not raised
        return {"room": room, "answered_s": None, "first_audio_s": None, "error": repr(exc)}
    finally:
        with contextlib.suppress(Exception):
            await caller.leave()
    return {
        "room": room,
        "answered_by": log.answered_by,
        "answered_s": None if log.answered is None else round(log.answered - rang, 2),
        "first_audio_s": round(log.agent_heard[0] - rang, 2) if log.agent_heard else None,
    }


async def run(
    fault: str,
    calls: int,
    interval_s: float,
    down_s: float,
    keep: Path | None = None,
    light: bool = False,
    delay_s: float = 4.0,
    seats: int = 3,
) -> dict[str, Any]:
    async with (
        lab_platform(offer_deadline_s=10.0) as (lk, config),
        VendorFakes(VendorsConfig(port=0)) as fakes,
        chain_call_log(config) as call_log,
        runtime_chain(lk, config, call_log=call_log) as chain,
        contextlib.AsyncExitStack() as stack,
    ):
        fakes.deepgram.script(*[LINES["question"]] * calls)
        fakes.anthropic.script(*[Reply(text="Your order arrives on Thursday.")] * calls)
        alone = fault == "slow"
        hosts = {"lf-lost": seats if alone else 12} | ({} if alone else {"lf-held": 10})
        started: list[Any]
        if light:
            started = [await chain.worker(h, seats=n) for h, n in hosts.items()]
        else:
            started = await asyncio.gather(
                *(start_process(chain, stack, host=h, seats=n, vendors=fakes)
                  for h, n in hosts.items())
            )  # fmt: skip
        lost, held = started[0], (started[1] if len(started) > 1 else None)
        if alone:
            [slow] = [w for w in lk.dispatcher.registry.all() if w.agent_name == lost.name]
            lk.slow(slow.id, delay_s)
        else:
            (lk.cut_link if fault == "cut" else lk.hang_link)(lost.name, down_s)
        faulted = time.time()

        async def ring(i: int) -> dict[str, Any]:
            await asyncio.sleep(i * interval_s)  # the callers' pacing
            return await one_caller(chain, i, light)

        callers = await asyncio.gather(*(ring(i) for i in range(calls)))
        if keep is not None:  # the workers' own logs, before the chain removes its folder
            await asyncio.to_thread(_copy_logs, Path(chain.tmp), keep)
        offered_lost = {
            e.room for e in lk.events.of(ev.DispatchCreated, lambda e: e.agent_name == lost.name)
        }
        for c in callers:
            c["offered_to_lost"] = c["room"] in offered_lost
        answered = [c["first_audio_s"] for c in callers if c["first_audio_s"] is not None]
        joined = [c["answered_s"] for c in callers if c["answered_s"] is not None]
        return {
            "fault": fault,
            "down_s": None if alone else down_s,
            "delay_s": delay_s if alone else None,
            "calls": calls,
            "interval_s": interval_s,
            "lost": lost.name,
            "held": None if held is None else held.name,
            "offered_to_lost": len(offered_lost),
            "answered_by_overflow": sum(
                "overflow" in (c.get("answered_by") or "") for c in callers
            ),
            "answered_by_lost": sum(c.get("answered_by") == lost.name for c in callers),
            "silent": calls - len(joined if light else answered),
            "worst_ring_to_answer_s": max(joined, default=None),
            "worst_ring_to_first_audio_s": max(answered, default=None),
            "fault_at": faulted,
            "callers": callers,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fault", choices=["cut", "hang", "slow"], default="cut")
    parser.add_argument("--calls", type=int, default=8)
    parser.add_argument("--interval", type=bounded(float, 0.01, 60), default=1.0)
    parser.add_argument("--down", type=bounded(float, 0.1, 3600), default=45.0)
    parser.add_argument(
        "--delay",
        type=bounded(float, 0, 600),
        default=4.0,
        help="slow: seconds each answer is late",
    )
    parser.add_argument("--seats", type=int, default=3, help="slow: the worker's seats")
    parser.add_argument(
        "--light",
        action="store_true",
        help="in-process workers whose jobs only join (THREAD): ring to answer, no audio",
    )
    parser.add_argument("--keep-logs", type=Path, help="copy the workers' logs to this folder")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = asyncio.run(
        run(
            args.fault,
            args.calls,
            args.interval,
            args.down,
            args.keep_logs,
            args.light,
            args.delay,
            args.seats,
        )
    )
    if args.json:
        print(json.dumps(result, indent=2))
        return
    fault = (
        f"answers {result['delay_s']:g} s late"
        if result["fault"] == "slow"
        else f"{result['fault']} for {result['down_s']:g} s"
    )
    print(
        f"{fault}, {result['calls']} callers "
        f"{result['interval_s']:g} s apart: offered to the faulted worker {result['offered_to_lost']}"
        f", answered by it {result['answered_by_lost']}, by the overflow "
        f"{result['answered_by_overflow']}, silent {result['silent']}; worst ring to "
        f"answer {result['worst_ring_to_answer_s']} s, to first audio "
        f"{result['worst_ring_to_first_audio_s']} s"
    )
    for c in result["callers"]:
        print(
            f"  {c['room']}: answered {c['answered_s']} s by {c.get('answered_by')}, first audio "
            f"{c['first_audio_s']} s{' (offered to the faulted worker)' if c['offered_to_lost'] else ''}"
        )


if __name__ == "__main__":
    main()
