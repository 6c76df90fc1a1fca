"""The overflow records what its sentence job says (issue 19: "the overflow's sentence job and a
dead worker's sentence job record what they said"), into the bucket its settings name
(``PINECALL_RECORDINGS_*``, read as the worker reads them): an agent whose definition says
``record`` has ``call.recording_started`` then ``call.recording`` (job ``sentence``, complete)
on its call's log before the seal, the object decoding as two channels, the agent's holding the
sentence and the caller's silent; an agent that does not record has no recording at all.
Against moto's S3 server on loopback."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator

import httpx
import pytest
from livekit import api

from pinecall_clients.bucket import Bucket, BucketAccess
from pinecall_loadlab.livekit import StandIn
from pinecall_loadlab.livekit.callers import sip_call
from pinecall_loadlab.livekit.testing import API_KEY, API_SECRET
from pinecall_loadlab.vendors import VendorFakes
from pinecall_loadlab.vendors.recordings import decode, voiced_seconds
from pinecall_loadlab.vendors.s3 import S3Fake
from pinecall_loadlab.vendors.s3_testing import *  # noqa: F403  (the S3 fake's fixtures)
from pinecall_loadlab.vendors.s3_testing import BUCKET, recordings_settings
from pinecall_overflow.server import Overflow
from pinecall_testkit.call_log import Keys, Process, bearer

from .conftest import Sealed, job_offer, offer_to, overflow_of, settings_for


@pytest.fixture
async def recording_overflow(
    standin: StandIn, vendor_fakes: VendorFakes, keys: Keys, call_log: Process, s3: S3Fake
) -> AsyncIterator[Overflow]:
    env = {f"PINECALL_{name.upper()}": value for name, value in recordings_settings(s3).items()}
    settings = settings_for(standin, vendor_fakes, keys, call_log.url, env)
    assert BucketAccess.of(settings) is not None
    async with overflow_of(settings) as o:
        yield o


async def define(call_log: Process, keys: Keys, name: str, *, record: bool) -> None:
    definition = {"name": name, "prompt": "Acme's bistro.", "record": record}
    async with httpx.AsyncClient(base_url=call_log.url) as http:
        put = await http.put(
            f"/v1/agents/{name}", json=definition, params={"org": "org_acme"},
            headers=bearer(keys.app),
        )  # fmt: skip
        assert put.status_code == 200, put.text


async def test_the_overflows_sentence_is_recorded_when_its_agent_records(
    recording_overflow: Overflow,
    standin: StandIn,
    livekit_api: api.LiveKitAPI,
    call_log: Process,
    keys: Keys,
    sealed: Sealed,
    bucket: Bucket,
) -> None:
    await define(call_log, keys, "support-bot", record=True)
    await define(call_log, keys, "sales-bot", record=False)
    async with asyncio.timeout(90):
        for room, agent in (("room-r1", "support-bot"), ("room-r2", "sales-bot")):
            caller = await sip_call(
                livekit_api, standin.url, API_KEY, API_SECRET, room=room, fleet="pinecall"
            )
            await offer_to(livekit_api, recording_overflow.name, job_offer(room, room, agent=agent))
            await caller.closed.wait()
            await sealed.wait(room)
    async with httpx.AsyncClient(base_url=call_log.url, headers=bearer(keys.operator)) as http:
        logs = {
            call: (await http.get(f"/v1/calls/{call}/entries")).json()["entries"]
            for call in ("room-r1", "room-r2")
        }
    kinds = [e["kind"] for e in logs["room-r1"]]
    assert kinds.index("call.recording_started") < kinds.index("call.sentence")
    assert kinds.index("call.recording") < kinds.index("call.ended") < kinds.index("call.sealed")
    assert "call.recording_failed" not in kinds
    [started] = [e["data"] for e in logs["room-r1"] if e["kind"] == "call.recording_started"]
    [said] = [e["data"] for e in logs["room-r1"] if e["kind"] == "call.recording"]
    assert started["key"] == "recordings/production/org_acme/room-r1/sentence.ogg"
    assert (said["job"], said["complete"], said["url"]) == (
        "sentence",
        True,
        f"s3://{BUCKET}/{started['key']}",
    )
    data = await bucket.get(started["key"])
    assert (len(data), hashlib.sha256(data).hexdigest()) == (said["bytes"], said["sha256"])
    decoded = decode(data)
    assert decoded.channels == 2
    assert abs(decoded.seconds - said["seconds"]) < 0.1
    caller_side, agent_side = decoded.samples
    assert voiced_seconds(agent_side) > 0.5  # the sentence, as the caller heard it
    assert voiced_seconds(caller_side) == 0.0  # a sentence job has no ears
    assert await bucket.uploads() == []
    # an agent that does not record: nothing of a recording on its log
    assert not [e for e in logs["room-r2"] if e["kind"].startswith("call.recording")]
