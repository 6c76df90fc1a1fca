"""The health port answers the startup probe only once LiveKit registered the worker and the
plugins a call needs are loaded in its process (issue 6, "Drain"; seed 000, "Deploys drain")."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
from livekit.agents import JobExecutorType

import pinecall_worker.call  # noqa: F401  (every plugin loaded, as `worker start` loads them)
from pinecall_contracts.worker import CallEnded, CallError, TurnMeasured
from pinecall_loadlab.livekit import StandIn
from pinecall_loadlab.livekit.labagents import answer_and_hold
from pinecall_loadlab.livekit.testing import API_KEY, API_SECRET
from pinecall_servicekit.platform import free_port
from pinecall_servicekit.testing.metrics import unregistered
from pinecall_testkit.roster import Keys, Replica
from pinecall_testkit.worker import serving
from pinecall_worker import domain
from pinecall_worker.measures import report
from pinecall_worker.server import Worker
from pinecall_worker.settings import WorkerSettings


def settings(livekit_url: str, keys: Keys, tmp_path: Path) -> WorkerSettings:
    return WorkerSettings.from_env(
        {},
        fleet_key=keys.production,
        max_jobs=2,
        worker_host="worker-health",
        livekit_url=livekit_url,
        livekit_api_key=API_KEY,
        livekit_api_secret=API_SECRET,
        heartbeat_s=3600,
        seal_timeout_s=4,
        health_port=0,
        measures_socket=str(tmp_path / "measures.sock"),
    )


def worker(s: WorkerSettings, roster: Replica) -> Worker:
    return Worker(
        s,
        answer_and_hold,
        roster_transport=roster.transport,
        executor=JobExecutorType.THREAD,
        num_idle_processes=0,
    )


async def probe(w: Worker, path: str) -> tuple[int, str]:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{w.health.port}") as http:
        r = await http.get(path, timeout=10)
        return r.status_code, r.text


async def test_a_worker_livekit_has_not_registered_is_alive_but_not_started(
    roster: Replica, keys: Keys, tmp_path: Path
) -> None:
    nobody = f"ws://127.0.0.1:{free_port()}"  # no LiveKit listens here: it never registers
    w = worker(settings(nobody, keys, tmp_path), roster)
    running = asyncio.create_task(w.run())
    try:
        async with asyncio.timeout(30):
            await w.health.listening.wait()
            assert await probe(w, "/healthz") == (200, "ok")
            assert await probe(w, "/readyz") == (503, "not registered with LiveKit")
            assert (await probe(w, "/"))[0] == 503
    finally:
        w.stop()
        async with asyncio.timeout(30):
            await running


async def test_the_startup_probe_answers_once_registered_with_every_plugin_loaded(
    standin: StandIn, roster: Replica, keys: Keys, tmp_path: Path
) -> None:
    s = settings(standin.url, keys, tmp_path)
    w = worker(s, roster)
    async with serving(w), asyncio.timeout(30):
        assert await probe(w, "/readyz") == (200, "ready")
        assert await probe(w, "/") == (200, "ready")
        # its metrics on the same port, counted from what its jobs say on the measures socket
        for measure in (
            TurnMeasured(call="call_1", first_audio_s=0.8),
            CallError(call="call_1", what="tts"),
            CallEnded(call="call_1", outcome="failed", failed=True),
        ):
            w.measures.arrived.clear()
            report(w.measures.path, measure)
            await w.measures.arrived.wait()
        status, text = await probe(w, "/metrics")
        assert status == 200
        assert unregistered(text, "worker") == []
        for line in (
            'pinecall_worker_seats{fleet="pinecall"} 2.0',
            'pinecall_worker_registered{fleet="pinecall"} 1.0',
            'pinecall_worker_draining{fleet="pinecall"} 0.0',
            'pinecall_first_audio_seconds_bucket{fleet="pinecall",le="1.0"} 1.0',
            'pinecall_worker_calls_ended_total{fleet="pinecall",outcome="failed"} 1.0',
            'pinecall_worker_calls_ended_total{fleet="pinecall",outcome="ok"} 0.0',
            'pinecall_worker_call_errors_total{fleet="pinecall"} 1.0',
            'pinecall_worker_relay_requests_total{fleet="pinecall"} 0.0',  # no call wrote yet
            'pinecall_worker_relay_batches_total{fleet="pinecall"} 0.0',
        ):
            assert line in text
    # a worker whose call needs a plugin this process never loaded is never ready
    lacking = Worker(
        s,
        answer_and_hold,
        roster_transport=roster.transport,
        executor=JobExecutorType.THREAD,
        num_idle_processes=0,
        plugins=domain.PLUGINS | {"livekit.plugins.elsewhere"},
    )
    async with serving(lacking), asyncio.timeout(30):
        status, text = await probe(lacking, "/readyz")
    assert (status, text) == (503, "plugins not loaded: livekit.plugins.elsewhere")
