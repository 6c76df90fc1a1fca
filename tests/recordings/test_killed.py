"""A job SIGKILLed mid-call loses no more of its recording than its last part (issue 19,
acceptance 2): the real worker's ``answer`` job, in a process of its own (PROCESS), records a
call into moto's S3 server and is SIGKILLed mid-call, once its agent answered and the call went
on quiet for two more uploads of the open part; the worker ends the call ``failed`` and leaves
it unsealed. Then

1. the dead worker's sentence job (offered as the death handler offers it, after the log's
   count) completes the parts uploaded: ``call.recording`` with ``complete`` false and the
   seconds kept, before the seal; or
2. the call gets no sentence job, and the reaper (two replicas reaping at once) does the same
   when it seals the call, exactly once;

and either way ``ListMultipartUploads`` is empty: nothing is left unfinished in the bucket, and
the recording kept covers the call up to its kill but for
:data:`pinecall_jobs.recording.LOSS_BOUND_S` seconds.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import os
import signal
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import pytest
from livekit import api

from pinecall_clients.bucket import Bucket, BucketAccess
from pinecall_clients.calllog import CallLogClient
from pinecall_clients.livekit import LiveKitAccess
from pinecall_contracts.agents import AgentDefinition
from pinecall_contracts.calls import CallLog
from pinecall_jobs.recording import LOSS_BOUND_S
from pinecall_labroom import LabRoom
from pinecall_loadlab.callers import LINES, Say, WaitForAgent, play
from pinecall_loadlab.livekit import StandIn
from pinecall_loadlab.livekit import events as ev
from pinecall_loadlab.livekit.testing import API_KEY, API_SECRET
from pinecall_loadlab.vendors import Reply, VendorFakes
from pinecall_loadlab.vendors.recordings import decode, voiced_seconds
from pinecall_loadlab.vendors.s3 import S3Fake
from pinecall_reaper.domain import Rules
from pinecall_reaper.reaper import Reaper
from pinecall_testkit.call_log import Process
from pinecall_testkit.roster import Keys
from pinecall_testkit.worker import CallEvents, kinds, of_kind, offer_call, read_log, serving
from pinecall_worker.server import Worker

pytestmark = pytest.mark.long

ANSWER = "Your order arrives on Thursday, before noon, at the front desk."
"""The answer: heard to its end before the kill. The recorder (livekit-agents') writes nothing
past the start of an agent's turn still playing, so a kill mid-turn loses that turn so far
whatever the flushing: the bound is held where it applies (``LOSS_BOUND_S``'s docstring)."""
RECORDED = AgentDefinition(
    name="recorded", prompt="You answer briefly.", greeting="Acme, how can I help?", record=True
)


async def killed_mid_call(
    worker: Worker,
    caller: Callable[[str], Awaitable[LabRoom]],
    livekit_api: api.LiveKitAPI,
    call_events: CallEvents,
    vendor_fakes: VendorFakes,
    s3: S3Fake,
    call: str,
) -> tuple[LabRoom, dt.datetime]:
    """A call of the recorded agent (its greeting, a question, the answer heard to its end)
    whose ``answer`` job is SIGKILLed once its open part was uploaded twice more after the
    answer (the pump sends every 5 s); returns once the worker ended the call (``failed``),
    the caller still in the room, with the wall time of the kill."""
    vendor_fakes.deepgram.script(LINES["question"])
    vendor_fakes.anthropic.script(Reply(text=ANSWER))
    room = await caller(call)
    await offer_call(livekit_api, worker.name, room=call, call=call, agent="recorded")
    await call_events.wait("opened", call)
    steps = [
        WaitForAgent(until_quiet_s=1.0),
        Say(line="question"),
        WaitForAgent(until_quiet_s=1.0, timeout_s=60),
    ]
    await play(room, steps)
    sent = s3.answered["parts"]
    assert await s3.answered_at_least("parts", sent + 2, within_s=60)
    [held] = worker.jobs.calls()
    assert held.pid is not None
    assert held.pid != os.getpid()
    killed_at = dt.datetime.now(dt.UTC)
    os.kill(held.pid, signal.SIGKILL)  # nothing of the job runs on: no finish, no abort
    ended = await call_events.wait("ended", call)
    assert ended.outcome == "failed"
    return room, killed_at


def kept_as_said(log: CallLog, data: bytes, killed_at: dt.datetime) -> dict[str, object]:
    """The one ``call.recording`` of ``log``, checked against the object's bytes ``data``, and
    long enough: the call up to ``killed_at`` but for :data:`LOSS_BOUND_S` seconds."""
    [started] = answers(of_kind(log, "call.recording_started"))
    [said] = answers(of_kind(log, "call.recording"))
    assert "call.recording_failed" not in kinds(log)
    assert said["url"] == f"s3://recordings/{started['key']}"
    assert (said["job"], said["complete"], said["channels"]) == (
        "answer",
        False,
        ["caller", "agent"],
    )
    assert (len(data), hashlib.sha256(data).hexdigest()) == (said["bytes"], said["sha256"])
    decoded = decode(data)
    assert decoded.channels == 2
    assert abs(decoded.seconds - float(said["seconds"])) < 0.1
    # what the parts held: the call up to the kill but for the bound (the recorder starts just
    # after its upload, whose entry is stamped first), and no more than the job lived (from
    # the upload's start to the end the worker wrote at its death)
    began = next(e.ts for e in log.entries if e.kind == "call.recording_started")
    ended = next(e.ts for e in log.entries if e.kind == "call.ended")
    lived = (killed_at - began).total_seconds()
    assert lived >= 10.0  # the greeting, the question, the answer and two uploads came first
    assert lived - LOSS_BOUND_S <= float(said["seconds"]) <= (ended - began).total_seconds() + 1.0
    return said


def answers(data: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ``answer`` job's of entries' ``data`` (a sentence job records its own)."""
    return [d for d in data if d.get("job", "answer") == "answer"]


async def define(call_log: Process, keys: Keys) -> None:
    async with CallLogClient(call_log.url, keys.app) as client:
        await client.put_agent(RECORDED, org="org_acme")


async def test_a_dead_jobs_sentence_job_keeps_the_parts_it_uploaded(
    worker: Worker,
    caller: Callable[[str], Awaitable[LabRoom]],
    livekit_api: api.LiveKitAPI,
    vendor_fakes: VendorFakes,
    keys: Keys,
    call_log: Process,
    call_events: CallEvents,
    s3: S3Fake,
    bucket: Bucket,
) -> None:
    await define(call_log, keys)
    async with serving(worker, within_s=180):
        async with asyncio.timeout(180):
            room, killed_at = await killed_mid_call(
                worker, caller, livekit_api, call_events, vendor_fakes, s3, "call_killed1"
            )
            async with CallLogClient(call_log.url, keys.production) as client:
                written = (await client.record("call_killed1")).written
            await offer_call(
                livekit_api,
                worker.name,
                room="call_killed1",
                call="call_killed1",
                job="sentence",
                written=written,
                agent="recorded",
            )
            await call_events.wait("sealed", "call_killed1")
        await room.leave()
    log = await read_log(call_log.url, keys.production, "call_killed1")
    order = kinds(log)
    assert order.index("call.ended") < order.index("call.sentence") < order.index("call.recording")
    [started] = answers(of_kind(log, "call.recording_started"))
    kept_as_said(log, await bucket.get(started["key"]), killed_at)
    # the sentence job recorded what it said, as any call of an agent that records (issue 19)
    [sentence] = [d for d in of_kind(log, "call.recording") if d["job"] == "sentence"]
    assert sentence["complete"] is True
    assert sentence["url"].endswith("/call_killed1/sentence.ogg")
    spoken = decode(await bucket.get(sentence["url"].removeprefix("s3://recordings/")))
    assert spoken.channels == 2
    assert voiced_seconds(spoken.samples[1]) > 0.5  # the sentence, as the caller heard it
    assert await bucket.uploads() == []


async def test_a_dead_job_with_no_sentence_job_has_its_parts_kept_by_the_reaper_once(
    worker: Worker,
    caller: Callable[[str], Awaitable[LabRoom]],
    livekit_api: api.LiveKitAPI,
    standin: StandIn,
    vendor_fakes: VendorFakes,
    keys: Keys,
    call_log: Process,
    call_events: CallEvents,
    s3: S3Fake,
    bucket_access: BucketAccess,
    bucket: Bucket,
) -> None:
    await define(call_log, keys)
    livekit = LiveKitAccess(url=standin.url, api_key=API_KEY, api_secret=API_SECRET)

    async def livekits() -> Mapping[str, LiveKitAccess]:
        return {"production": livekit}

    async with serving(worker, within_s=180):
        async with asyncio.timeout(180):
            room, killed_at = await killed_mid_call(
                worker, caller, livekit_api, call_events, vendor_fakes, s3, "call_killed2"
            )
            await room.leave()  # the caller hangs up; the dead job's connection times out
            await standin.events.wait_for(
                ev.ParticipantLeft,
                lambda e: e.room == "call_killed2" and e.kind == api.ParticipantInfo.AGENT,
            )
            # two replicas reap at once, quiet minutes later: one keeps it, both seal
            later = dt.datetime.now(dt.UTC) + dt.timedelta(minutes=10)
            async with (
                CallLogClient(call_log.url, keys.service) as one,
                CallLogClient(call_log.url, keys.service) as two,
            ):
                reapers = [
                    Reaper(c, livekits, Rules(), recordings=bucket_access) for c in (one, two)
                ]
                try:
                    done = await asyncio.gather(*(r.reap(later) for r in reapers))
                finally:
                    for reaper in reapers:
                        await reaper.aclose()
            sealed = await call_events.wait("sealed", "call_killed2")
    assert sealed.outcome == "failed"  # the worker's outcome stays; the reaper only sealed
    assert [v.call for d in done for v in d.reaped if v.call == "call_killed2"]
    assert not [f for d in done for f in d.failed if "call_killed2" in f]
    kept = sum(r.totals.get("recording_kept", 0) for r in reapers)
    assert kept >= 1  # both may have kept it (the bucket completes once); the log took one
    assert sum(r.totals.get("recording_failed", 0) for r in reapers) == 0
    log = await read_log(call_log.url, keys.production, "call_killed2")
    assert log.state == "sealed"
    [started] = answers(of_kind(log, "call.recording_started"))
    kept_as_said(log, await bucket.get(started["key"]), killed_at)
    assert await bucket.uploads() == []
