"""A call recorded in its own job, to a real S3 server (issue 19, acceptance 1 and 3): the real
worker against the LiveKit stand-in and the vendor fakes, a real call-log replica process, and
moto's S3 server on loopback (``pinecall_loadlab.vendors.s3``) as the environment's bucket.

1. A call whose agent records: ``call.recording_started`` then ``call.recording`` before the
   call's end; the object in the bucket is that entry's bytes and sha256, decodes as two
   channels for as long as the entry says and about as long as the call, the caller's line in
   the left channel and the agent's speech in the right; no upload is left unfinished.
2. The bucket refusing parts and the completion: ``call.recording_failed`` with the bucket's
   answer; the call itself goes on as any other (answered, heard, ended ``completed``), and the
   upload is aborted.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from livekit import api

from pinecall_clients.bucket import Bucket
from pinecall_clients.calllog import CallLogClient
from pinecall_contracts.agents import AgentDefinition
from pinecall_labroom import LabRoom
from pinecall_loadlab.callers import LINES, Say, WaitForAgent, play
from pinecall_loadlab.vendors import Reply, ToolUse, VendorFakes
from pinecall_loadlab.vendors.recordings import HOLDS, decode, holds_lines, voiced_seconds
from pinecall_loadlab.vendors.s3 import S3Fake
from pinecall_loadlab.vendors.s3_testing import *  # noqa: F403  (the S3 fake's fixtures)
from pinecall_loadlab.vendors.s3_testing import BUCKET, recordings_settings
from pinecall_testkit.call_log import Process
from pinecall_testkit.roster import Keys
from pinecall_testkit.worker import CallEvents, kinds, of_kind, offer_call, read_log, serving
from pinecall_worker.server import Worker

pytestmark = pytest.mark.long  # scheduled first (the testing plugin)

RECORDED = AgentDefinition(
    name="recorded", prompt="You answer briefly.", greeting="Acme, how can I help?", record=True
)
ANSWER = "Your order arrives on Thursday."
BYE = "Goodbye, and thank you for calling."


async def define(call_log: Process, keys: Keys) -> None:
    async with CallLogClient(call_log.url, keys.app) as client:
        await client.put_agent(RECORDED, org="org_acme")


async def a_call(
    worker: Worker,
    caller: Callable[[str], Awaitable[LabRoom]],
    livekit_api: api.LiveKitAPI,
    call_events: CallEvents,
    call: str,
) -> tuple[Any, Any]:
    """A call of the recorded agent: its greeting heard, a question, then goodbye; the agent
    ends it."""
    room = await caller(call)
    await offer_call(livekit_api, worker.name, room=call, call=call, agent="recorded")
    await call_events.wait("opened", call)
    heard = await play(
        room,
        [WaitForAgent(until_quiet_s=1.0), Say(line="question"), WaitForAgent(until_quiet_s=1.0)],
    )
    playing = asyncio.create_task(play(room, [Say(line="goodbye"), WaitForAgent(timeout_s=60)]))
    await room.closed.wait()  # end_call deletes the room
    playing.cancel()
    await asyncio.gather(playing, return_exceptions=True)
    return heard, await call_events.wait("sealed", call)


async def test_a_recorded_call_is_in_the_bucket_whole_both_sides_as_its_log_says(
    call_worker: Callable[..., Worker],
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
    vendor_fakes.deepgram.script(LINES["question"], LINES["goodbye"])
    vendor_fakes.anthropic.script(
        Reply(text=ANSWER), Reply(tool=ToolUse(name="end_call")), Reply(text=BYE)
    )
    worker = call_worker(**recordings_settings(s3))
    async with serving(worker):
        async with asyncio.timeout(120):
            heard, sealed = await a_call(worker, caller, livekit_api, call_events, "call_rec1")
    assert heard.agent_heard
    assert sealed.outcome == "completed"
    log = await read_log(call_log.url, keys.production, "call_rec1")
    order = kinds(log)
    assert order.index("call.recording_started") < order.index("call.recording")
    assert order.index("call.recording") < order.index("call.ended")
    assert "call.recording_failed" not in order
    [started] = of_kind(log, "call.recording_started")
    [said] = of_kind(log, "call.recording")
    assert said["url"] == f"s3://{BUCKET}/{started['key']}"
    assert started["key"] == "recordings/production/org_acme/call_rec1/answer.ogg"
    assert (said["channels"], said["job"], said["complete"]) == (
        ["caller", "agent"],
        "answer",
        True,
    )
    data = await bucket.get(started["key"])
    assert (len(data), hashlib.sha256(data).hexdigest()) == (said["bytes"], said["sha256"])
    decoded = decode(data)
    assert decoded.channels == 2
    assert abs(decoded.seconds - said["seconds"]) < 0.1
    # as long as the call from the session's start (the recorder starts with it) to its end
    began = next(e.ts for e in log.entries if e.kind == "call.recording_started")
    ended = next(e.ts for e in log.entries if e.kind == "call.ended")
    assert abs(said["seconds"] - (ended - began).total_seconds()) < 1.0
    # the end is stamped when the session closed (CallEnd.at), not when the log heard it, after
    # the recording's last upload and its entry
    assert ended < next(e.ts for e in log.entries if e.kind == "call.recording")
    caller_side, agent_side = decoded.samples
    # the caller's lines are on the left; the agent's greeting and answers on the right
    assert holds_lines(caller_side, ["question", "goodbye"]) > HOLDS
    assert voiced_seconds(agent_side) > 1.0
    assert await bucket.uploads() == []


async def test_a_bucket_that_refuses_gives_recording_failed_and_the_call_goes_on(
    call_worker: Callable[..., Worker],
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
    vendor_fakes.deepgram.script(LINES["question"], LINES["goodbye"])
    vendor_fakes.anthropic.script(
        Reply(text=ANSWER), Reply(tool=ToolUse(name="end_call")), Reply(text=BYE)
    )
    s3.refuse({"parts", "complete"}, status=403)
    worker = call_worker(**recordings_settings(s3))
    async with serving(worker):
        async with asyncio.timeout(120):
            heard, sealed = await a_call(worker, caller, livekit_api, call_events, "call_rec3")
    # the call is as any other: the caller heard the answer, the agent ended it
    assert heard.agent_heard
    assert sealed.outcome == "completed"
    log = await read_log(call_log.url, keys.production, "call_rec3")
    assert [t["text"] for t in of_kind(log, "turn.agent")] == [RECORDED.greeting, ANSWER, BYE]
    order = kinds(log)
    assert "call.recording" not in order
    [failed] = of_kind(log, "call.recording_failed")
    assert order.index("call.recording_failed") < order.index("call.ended")
    assert "403 AccessDenied" in failed["reason"]
    assert "UploadPart" in failed["reason"]
    assert failed["key"] == "recordings/production/org_acme/call_rec3/answer.ogg"
    assert s3.counted["parts"] >= 1
    assert await bucket.uploads() == []  # aborted: nothing left to bill
