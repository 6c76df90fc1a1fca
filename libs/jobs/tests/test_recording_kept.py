"""What a dead job's recording becomes (issue 19, acceptance 2, the bucket's half): the parts it
uploaded are completed into the object and the entry says how much was kept; a job that uploaded
nothing has its upload aborted and a ``call.recording_failed``; either way no unfinished
multipart upload is left. Against moto's S3 server on loopback, with a real OGG/Opus file cut
where a dead job's last part would have ended."""

from __future__ import annotations

import io

import av
import numpy as np

from pinecall_clients.bucket import Bucket, BucketAccess
from pinecall_contracts.recordings import RecordingStarted
from pinecall_jobs.kept import keep_uploaded
from pinecall_loadlab.vendors.s3_testing import *  # noqa: F403  (the S3 fake's fixtures)

KEY = "recordings/production/org_acme/call_1/answer.ogg"


def ogg(seconds: float) -> bytes:
    """A stereo OGG/Opus file of a 440 Hz tone, ``seconds`` long."""
    out = io.BytesIO()
    with av.open(out, mode="w", format="ogg") as container:
        stream = container.add_stream("libopus", rate=48000, layout="stereo")
        t = np.arange(int(seconds * 48000)) / 48000
        tone = (0.3 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)
        frame = av.AudioFrame.from_ndarray(np.stack([tone, tone]), format="fltp", layout="stereo")
        frame.sample_rate = 48000
        for packet in stream.encode(frame):
            container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return out.getvalue()


async def test_the_parts_a_dead_job_uploaded_are_kept_and_said(
    bucket_access: BucketAccess, bucket: Bucket
) -> None:
    whole = ogg(20.0)
    cut = whole[: len(whole) * 3 // 4]  # the open part as last uploaded: 3/4 of the call
    upload = await bucket.start_upload(KEY)
    await bucket.put_part(KEY, upload, 1, cut)
    kind, data = await keep_uploaded(bucket_access, RecordingStarted(key=KEY, upload_id=upload))
    assert kind == "call.recording"
    assert data["complete"] is False
    assert data["bytes"] == len(cut)
    assert 13.0 < data["seconds"] < 16.0  # about 3/4 of 20 s: the log says how much
    assert await bucket.get(KEY) == cut
    assert await bucket.uploads() == []


async def test_a_dead_job_that_uploaded_nothing_leaves_a_failure_and_no_upload(
    bucket_access: BucketAccess, bucket: Bucket
) -> None:
    upload = await bucket.start_upload(KEY)
    kind, data = await keep_uploaded(bucket_access, RecordingStarted(key=KEY, upload_id=upload))
    assert kind == "call.recording_failed"
    assert data["kept_s"] == 0.0
    assert "before it uploaded" in data["reason"]
    assert await bucket.uploads() == []


async def test_an_upload_another_kept_first_is_said_as_the_object_it_became(
    bucket_access: BucketAccess, bucket: Bucket
) -> None:
    # two keepers of one dead job's upload (two reaper replicas, or its sentence job and the
    # reaper): the second finds it completed and says the same object, never a failure
    cut = ogg(8.0)
    upload = await bucket.start_upload(KEY)
    await bucket.put_part(KEY, upload, 1, cut)
    started = RecordingStarted(key=KEY, upload_id=upload)
    first = await keep_uploaded(bucket_access, started)
    second = await keep_uploaded(bucket_access, started)
    assert first == second
    assert first[0] == "call.recording"
    assert first[1]["bytes"] == len(cut)
    assert await bucket.uploads() == []
