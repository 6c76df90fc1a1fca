"""The worker's control overhead per call: what its heartbeat, its measures socket and each call's
call-log writer cost, apart from the call's audio and vendors. Used by ``worker_calls.py``.

The real pieces run in this process against the run's roster and call-log replicas: ``calls``
calls opened on the log (not measured), each with its ``CallLogWriter`` doing what a call's
recorder does — a turn every ``turn_every_s`` (``turn.user`` and ``turn.agent``, one
``TurnMeasured`` datagram to a ``MeasuresSocket``, a flush at once) and a flush every second —
and one ``Heartbeat`` every 5 s carrying the minute. The number is this process's CPU over the
run's wall time, per call (cores per call); the replicas' CPU is the control plane's, not the
worker's, and is not in it.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from benchkit import Bench, self_cpu_s

from pinecall_clients.calllog import CallLogClient, CallLogWriter
from pinecall_clients.roster import RosterClient
from pinecall_contracts.calls import CallOpen
from pinecall_contracts.fleet import HeartbeatReply, WorkerHeartbeat
from pinecall_contracts.worker import TurnMeasured
from pinecall_worker.heartbeat import Heartbeat
from pinecall_worker.measures import MeasuresSocket, report

WORKER = "pinecall/bench-control.1791067258"


async def control_overhead(
    bench: Bench,
    roster_url: str,
    call_log_url: str,
    *,
    calls: int = 20,
    seconds: float = 20.0,
    turn_every_s: float = 5.0,
) -> dict[str, Any]:
    measures = MeasuresSocket(bench.workdir / "control.sock")
    await measures.start()
    client = CallLogClient(call_log_url, bench.fleet_key)
    roster = RosterClient(bench.fleet_key, base_url=roster_url)
    ids = [f"control-{i}" for i in range(calls)]
    for call in ids:
        await client.open(
            CallOpen(
                call=call, agent="bench", org="", environment="production", room=call, worker=WORKER
            )
        )
    writers = [client.writer(call) for call in ids]

    def state() -> WorkerHeartbeat:
        return WorkerHeartbeat(
            fleet="pinecall",
            worker=WORKER,
            agent_name=WORKER,
            active=calls,
            max_jobs=calls,
            load=1.0,
            draining=False,
            minute=measures.minute.read(time.monotonic()),
        )

    async def answered(_: HeartbeatReply) -> None:
        return None

    heartbeat = Heartbeat(roster, state, answered, every_s=5.0)
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds

    async def one(i: int, writer: CallLogWriter) -> None:
        next_turn = loop.time() + turn_every_s * i / calls  # the calls' turns spread out
        while loop.time() < end:
            if loop.time() >= next_turn:
                writer.add("turn.user", {"text": "Can you tell me when my order will arrive?"})
                writer.add("turn.agent", {"text": "Thursday.", "first_audio_s": 1.2})
                report(measures.path, TurnMeasured(call=writer.call, first_audio_s=1.2))
                next_turn += turn_every_s
            await writer.flush()
            await asyncio.sleep(min(1.0, max(0.0, next_turn - loop.time())))  # the cadence

    cpu0, t0 = self_cpu_s(), time.monotonic()
    beating = asyncio.create_task(heartbeat.run())
    try:
        await asyncio.gather(*(one(i, w) for i, w in enumerate(writers)))
    finally:
        beating.cancel()
        await asyncio.gather(beating, return_exceptions=True)
    cpu, wall = self_cpu_s() - cpu0, time.monotonic() - t0
    written = sum(w.written for w in writers)
    await client.aclose()
    await roster.aclose()
    await measures.close()
    return {
        "cores_per_call": round(cpu / wall / calls, 5),
        "entries_written": written,
        "measures_received": measures.received,
        "heartbeats_answered": heartbeat.answered,
        "detail": (
            f"{calls} calls, a turn each {turn_every_s:g} s (2 entries, 1 measure, a flush), a "
            f"flush each second, a heartbeat each 5 s: {cpu:.2f} CPU s over {wall:.1f} s"
        ),
    }
