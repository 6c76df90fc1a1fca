"""The worker against the LiveKit stand-in, the vendor fakes, a real roster and a real call-log
(a replica process of its own, on real Postgres and NATS). Both are started whole by their test
kits (pinecall_testkit): the worker's tests import nothing of another service."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from livekit import api
from livekit.agents import JobExecutorType

from pinecall_labroom import LabRoom
from pinecall_loadlab.livekit import StandIn
from pinecall_loadlab.livekit.callers import sip_call
from pinecall_loadlab.livekit.testing import *  # noqa: F403  (the stand-in's fixtures)
from pinecall_loadlab.livekit.testing import API_KEY, API_SECRET
from pinecall_loadlab.vendors import VendorFakes
from pinecall_loadlab.vendors.testing import *  # noqa: F403  (the vendor fakes)
from pinecall_testkit.call_log import Process, replica_env, served
from pinecall_testkit.roster import Keys, Replica, make_keys, replica_on
from pinecall_testkit.worker import CallEvents
from pinecall_worker.call import entrypoint, prewarm
from pinecall_worker.server import Worker
from pinecall_worker.settings import WorkerSettings


@pytest.fixture
async def roster(database_url: str, nats_url: str, nats_namespace: str) -> AsyncIterator[Replica]:
    async with replica_on(database_url, nats_url, nats_namespace) as client:
        yield client


@pytest.fixture
async def keys(database_url: str) -> Keys:
    return await make_keys(database_url)


@pytest.fixture
def call_log_env(database_url: str, nats_url: str, nats_namespace: str) -> dict[str, str]:
    """A call-log replica's environment, on the test's database and NATS namespace."""
    return replica_env(database_url, nats_url, nats_namespace)


@pytest.fixture
async def call_log(call_log_env: dict[str, str]) -> AsyncIterator[Process]:
    """One call-log replica as a real process (``call-log serve``)."""
    async with served(call_log_env, 1) as (replica,):
        yield replica


@pytest.fixture
async def call_events(nats_url: str, nats_namespace: str) -> AsyncIterator[CallEvents]:
    async with CallEvents.listening(nats_url, nats_namespace) as events:
        yield events


@pytest.fixture
def lab_settings(
    standin: StandIn, vendor_fakes: VendorFakes, keys: Keys, tmp_path: Path
) -> Callable[..., WorkerSettings]:
    """Settings of a worker of the fleet ``pinecall`` on the stand-in, the vendors faked, its
    calls in lab rooms; ``call_log_url`` and anything else given as keywords."""

    def make(**overrides: Any) -> WorkerSettings:
        given: dict[str, Any] = {
            "fleet": "pinecall",
            "fleet_key": keys.production,
            "max_jobs": 4,
            "worker_host": "worker-call",
            "livekit_url": standin.url,
            "livekit_api_key": API_KEY,
            "livekit_api_secret": API_SECRET,
            "heartbeat_s": 3600,
            "drain_timeout_s": 60,
            "seal_timeout_s": 60,
            "health_port": 0,
            "lab_rooms": True,
            "measures_socket": str(tmp_path / "measures.sock"),
            "deepgram_url": vendor_fakes.deepgram_url,
            "anthropic_url": vendor_fakes.anthropic_url,
            "cartesia_url": vendor_fakes.cartesia_url,
            "deepgram_api_key": "lab",
            "anthropic_api_key": "lab",
            "cartesia_api_key": "lab",
        }
        return WorkerSettings.from_env({}, **(given | overrides))

    return make


@pytest.fixture
def worker_for(
    lab_settings: Callable[..., WorkerSettings], roster: Replica
) -> Callable[..., Worker]:
    """A worker that runs the real call (``pinecall_worker.call``) on the stand-in, heard by the
    roster, writing to the call-log at ``call_log_url``; THREAD jobs unless ``executor`` says
    otherwise; other keywords are settings."""

    def make(
        call_log_url: str, *, executor: JobExecutorType = JobExecutorType.THREAD, **overrides: Any
    ) -> Worker:
        return Worker(
            lab_settings(call_log_url=call_log_url, **overrides),
            entrypoint,
            prewarm=prewarm,
            roster_transport=roster.transport,
            executor=executor,
            num_idle_processes=1,
        )

    return make


@pytest.fixture
def call_worker(worker_for: Callable[..., Worker], call_log: Process) -> Callable[..., Worker]:
    """``worker_for`` the test's ``call_log`` replica."""
    return functools.partial(worker_for, call_log.url)


@pytest.fixture
def caller(standin: StandIn, livekit_api: api.LiveKitAPI) -> Callable[[str], Awaitable[LabRoom]]:
    """A SIP caller alone in a room of its own, as LiveKit SIP brings one (``sip_call``)."""

    async def ring(room: str) -> LabRoom:
        return await sip_call(
            livekit_api, standin.url, API_KEY, API_SECRET, room=room, fleet="pinecall"
        )

    return ring
