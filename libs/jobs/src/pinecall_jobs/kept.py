"""What became of a recording, said on its call's log: the object's ``call.recording`` read
back from its bytes, and the parts a dead job left in an unfinished multipart upload kept
(issue 19, acceptance 2). It imports no livekit-agents: the reaper runs it as the sentence job
does.

A dead job leaves ``call.recording_started`` on its call's log and nothing after it
(:func:`unfinished`); whoever finishes the call — the dead worker's sentence job
(:mod:`pinecall_jobs.sentence`), or the reaper when the call gets none — completes the parts it
uploaded into the object, or aborts an upload with none (:func:`keep_uploaded`), and writes the
entry that says how much was kept, after the log's count, before the seal.

**Exactly once.** Two of them may find the same upload (two reaper replicas, or a sentence job
and the reaper): the bucket completes an upload once, and the one that comes second finds it
gone (``NoSuchUpload``) with the object there, and says the same ``call.recording`` of it; the
log then takes one of the two entries, since both are written after the count they read and the
second is a 409 (the caller reads the log again and finds nothing left unfinished).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import io
from typing import Any

import av
import msgspec

from pinecall_clients.bucket import Bucket, BucketAccess, BucketError, BucketRefused
from pinecall_clients.calllog import SEAL_WITHIN_S, CallLogClient
from pinecall_contracts import entries
from pinecall_contracts.recordings import (
    Recording,
    RecordingFailed,
    RecordingJob,
    RecordingStarted,
)


def seconds_of(data: bytes) -> float:
    """The length in seconds of an OGG/Opus recording's bytes: its last packet's end, read from
    the stream's timestamps (no decoding). A file cut short (a dead job's parts) reads to its
    last whole page. ``av.error.FFmpegError`` when it is no OGG at all."""
    end = 0.0
    with av.open(io.BytesIO(data), mode="r", format="ogg") as container:
        stream = container.streams.audio[0]
        base = stream.time_base
        assert base is not None
        for packet in container.demux(stream):
            if packet.pts is not None:
                end = max(end, float((packet.pts + (packet.duration or 0)) * base))
    return end


async def recording_of(
    access: BucketAccess, key: str, data: bytes, *, job: RecordingJob, complete: bool
) -> Recording:
    """``call.recording`` of the object ``key`` whose bytes are ``data``. Its length and digest
    are read in a thread: demuxing a long call's file took 0.3-0.6 s, which on the job's event
    loop is audio the caller does not hear (and heartbeats not sent)."""
    seconds, digest = await asyncio.to_thread(_measured, data)
    return Recording(
        url=access.url(key),
        seconds=round(seconds, 3),
        bytes=len(data),
        sha256=digest,
        job=job,
        complete=complete,
    )


def _measured(data: bytes) -> tuple[float, str]:
    return seconds_of(data), hashlib.sha256(data).hexdigest()


def entry_data(said: Recording | RecordingFailed | RecordingStarted) -> dict[str, Any]:
    """``said`` as an entry's ``data``: its fields, without the contract's tag or a None."""
    data: dict[str, Any] = msgspec.to_builtins(said)
    return {k: v for k, v in data.items() if k != "type" and v is not None}


def unfinished(log: list[Any]) -> list[RecordingStarted]:
    """The recordings a call's entries (``Entry`` of ``CallLog.entries``) say began and nothing
    says ended (no ``call.recording`` nor ``call.recording_failed`` of their key)."""
    started: dict[str, RecordingStarted] = {}
    for entry in log:
        if entry.kind == entries.CALL_RECORDING_STARTED:
            said = RecordingStarted(
                key=entry.data["key"],
                upload_id=entry.data["upload_id"],
                job=entry.data.get("job", "answer"),
            )
            started[said.key] = said
        elif entry.kind == entries.CALL_RECORDING_FAILED and entry.data.get("key"):
            started.pop(entry.data["key"], None)
        elif entry.kind == entries.CALL_RECORDING and entry.data.get("url"):
            started.pop(entry.data["url"].split("/", 3)[-1], None)
    return list(started.values())


async def keep_uploaded(
    access: BucketAccess, started: RecordingStarted
) -> tuple[str, dict[str, Any]]:
    """Complete the upload a dead job left (``started``) with the parts it uploaded, or abort it
    when it uploaded none; the entry that says how much was kept (``call.recording`` with
    ``complete`` false, or ``call.recording_failed`` with ``kept_s`` 0). Leaves no unfinished
    upload behind either way. An upload already completed by another (the object is there)
    answers that object's ``call.recording``; one aborted by another, or refused, is said as
    failed with the bucket's answer."""
    async with Bucket(access) as bucket:
        try:
            try:
                parts = await bucket.parts(started.key, started.upload_id)
            except BucketRefused as exc:
                if exc.status != 404 or (data := await _object(bucket, started.key)) is None:
                    raise
                kept = await recording_of(
                    access, started.key, data, job=started.job, complete=False
                )
                return entries.CALL_RECORDING, entry_data(kept)
            if not parts:
                await bucket.abort(started.key, started.upload_id)
                reason = "the job that recorded ended before it uploaded any of it"
                failed = RecordingFailed(reason=reason, key=started.key, job=started.job)
                return entries.CALL_RECORDING_FAILED, entry_data(failed)
            await bucket.complete(started.key, started.upload_id, parts)
            data = await bucket.get(started.key)
        except BucketError as exc:
            with contextlib.suppress(BucketError):
                await bucket.abort(started.key, started.upload_id)
            reason = f"the parts a dead job uploaded were not kept: {exc}"
            failed = RecordingFailed(reason=reason, key=started.key, job=started.job)
            return entries.CALL_RECORDING_FAILED, entry_data(failed)
    kept = await recording_of(access, started.key, data, job=started.job, complete=False)
    return entries.CALL_RECORDING, entry_data(kept)


async def _object(bucket: Bucket, key: str) -> bytes | None:
    """The object's bytes, or None when the bucket has no such object (404)."""
    try:
        return await bucket.get(key)
    except BucketRefused as exc:
        if exc.status == 404:
            return None
        raise


ROUNDS = 3
"""Times :func:`keep_unfinished` reads the log again after another wrote first (a 409)."""


async def keep_unfinished(
    log: CallLogClient, call: str, access: BucketAccess
) -> list[tuple[str, dict[str, Any]]]:
    """Keep every recording ``call``'s log says began and nothing says ended
    (:func:`unfinished`, :func:`keep_uploaded`) and write each one's entry after the log's count
    (with ``log``'s key: the call's fleet key, or the reaper's service key); the entries this
    wrote. A batch the log refused because another wrote first is not sent again: the log is
    read again, and what the other kept is no longer unfinished. A sealed call is left as it
    is (nothing can be written to it). ``CallLogError`` when the log does not answer."""
    wrote: list[tuple[str, dict[str, Any]]] = []
    for _ in range(ROUNDS):
        # the count before the entries: another's entry written after this count is refused at
        # it (a 409, or a replay of the same bytes), and one written before it is in the entries
        # read. Read the other way round, an entry written between the two reads was missed and
        # this one went after it: two reapers each wrote a call.recording (CI, test_killed)
        record = await log.record(call)
        read = await log.entries(call)
        left = unfinished(read.entries) if read.state != "sealed" else []
        if not left:
            return wrote
        said = [await keep_uploaded(access, started) for started in left]
        writer = log.writer(call, written=record.written, batch_timeout_s=SEAL_WITHIN_S)
        for kind, data in said:
            writer.add(kind, data)
        await writer.drain()
        if not writer.refused and not writer.dropped:
            return wrote + said
    return wrote
