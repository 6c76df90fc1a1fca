"""A recorded call across services: the real worker (its jobs in processes of their own, so one
can be SIGKILLed), a call-log replica process on real Postgres and NATS, the reaper in the test's
loop, the LiveKit stand-in and the vendor fakes, and moto's S3 server on loopback as the bucket.

They are cross-service tests (the worker's job dies; its sentence job or the reaper keeps what
it uploaded), so they live here: a service's tests import no other service.
"""

from __future__ import annotations

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
from pinecall_loadlab.vendors.s3 import S3Fake
from pinecall_loadlab.vendors.s3_testing import *  # noqa: F403  (the S3 fake's fixtures)
from pinecall_loadlab.vendors.s3_testing import recordings_settings
from pinecall_loadlab.vendors.testing import *  # noqa: F403  (the vendor fakes)
from pinecall_testkit.call_log import Process, replica_env, served
from pinecall_testkit.roster import Keys, Replica, make_keys, replica_on
from pinecall_testkit.worker import CallEvents
from pinecall_worker.call import entrypoint, prewarm
from pinecall_worker.server import Worker
from pinecall_worker.settings import WorkerSettings


@pytest.fixture
async def keys(database_url: str) -> Keys:
    return await make_keys(database_url)


@pytest.fixture
async def roster(database_url: str, nats_url: str, nats_namespace: str) -> AsyncIterator[Replica]:
    async with replica_on(database_url, nats_url, nats_namespace) as client:
        yield client


@pytest.fixture
async def call_log(database_url: str, nats_url: str, nats_namespace: str) -> AsyncIterator[Process]:
    """One call-log replica as a real process (``call-log serve``)."""
    async with served(replica_env(database_url, nats_url, nats_namespace), 1) as (replica,):
        yield replica


@pytest.fixture
async def call_events(nats_url: str, nats_namespace: str) -> AsyncIterator[CallEvents]:
    async with CallEvents.listening(nats_url, nats_namespace) as events:
        yield events


@pytest.fixture
def worker(
    standin: StandIn,
    vendor_fakes: VendorFakes,
    keys: Keys,
    roster: Replica,
    call_log: Process,
    s3: S3Fake,
    tmp_path: Path,
) -> Worker:
    """A worker of the fleet ``pinecall`` running the real call on the stand-in and the vendor
    fakes, its jobs in processes of their own (PROCESS), recording into the fake's bucket."""
    given: dict[str, Any] = {
        "fleet": "pinecall",
        "fleet_key": keys.production,
        "max_jobs": 4,
        "worker_host": "worker-rec",
        "livekit_url": standin.url,
        "livekit_api_key": API_KEY,
        "livekit_api_secret": API_SECRET,
        "heartbeat_s": 3600,
        "drain_timeout_s": 60,
        "seal_timeout_s": 60,
        "health_port": 0,
        "lab_rooms": True,
        "measures_socket": str(tmp_path / "measures.sock"),
        "call_log_url": call_log.url,
        "deepgram_url": vendor_fakes.deepgram_url,
        "anthropic_url": vendor_fakes.anthropic_url,
        "cartesia_url": vendor_fakes.cartesia_url,
        "deepgram_api_key": "lab",
        "anthropic_api_key": "lab",
        "cartesia_api_key": "lab",
        **recordings_settings(s3),
    }
    return Worker(
        WorkerSettings.from_env({}, **given),
        entrypoint,
        prewarm=prewarm,
        roster_transport=roster.transport,
        executor=JobExecutorType.PROCESS,
        num_idle_processes=1,
    )


@pytest.fixture
def caller(standin: StandIn, livekit_api: api.LiveKitAPI) -> Callable[[str], Awaitable[LabRoom]]:
    """A SIP caller alone in a room of its own, as LiveKit SIP brings one."""

    async def ring(room: str) -> LabRoom:
        return await sip_call(
            livekit_api, standin.url, API_KEY, API_SECRET, room=room, fleet="pinecall"
        )

    return ring
