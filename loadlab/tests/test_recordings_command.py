"""``lab recordings`` (issue 19, "In the lab and the main job"): what ``up``'s report is told of
each recording, read over HTTP from moto's S3 server on loopback: its bytes and SHA-256, its
channels and length decoded, how much of its caller's said lines the caller's channel holds; a
request that is no list of recordings is refused with a named error, before anything is read."""

from __future__ import annotations

import hashlib
import io
import json

import av
import numpy as np
import pytest
from click.testing import CliRunner

from pinecall_clients.bucket import Bucket
from pinecall_loadlab.callers.speech import line_pcm
from pinecall_loadlab.commands import lab
from pinecall_loadlab.vendors.s3 import S3Fake
from pinecall_loadlab.vendors.s3_testing import *  # noqa: F403  (the S3 fake's fixtures)
from pinecall_loadlab.vendors.s3_testing import BUCKET

RATE = 48_000


def recording(caller: np.ndarray, seconds: float) -> bytes:
    """A 2-channel OGG/Opus file of ``seconds``: ``caller`` (s16) on the left from 0.5 s, the
    agent's (right) channel silent, as the worker's recorder lays a call out."""
    n = int(seconds * RATE)
    left, right = np.zeros(n, np.int16), np.zeros(n, np.int16)
    left[RATE // 2 : RATE // 2 + len(caller)] = caller[: n - RATE // 2]
    both = np.empty(2 * n, np.int16)
    both[0::2], both[1::2] = left, right
    out = io.BytesIO()
    with av.open(out, mode="w", format="ogg") as container:
        stream = container.add_stream("libopus", rate=RATE, layout="stereo")
        for i in range(0, n, 960):
            frame = av.AudioFrame.from_ndarray(
                both[2 * i : 2 * (i + 960)].reshape(1, -1), format="s16", layout="stereo"
            )
            frame.rate = RATE
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return out.getvalue()


async def put(bucket: Bucket, key: str, data: bytes) -> str:
    """The object in the bucket (a multipart upload of one part, as a recording is); its signed
    URL, as call-log hands it out."""
    upload = await bucket.start_upload(key)
    await bucket.complete(key, upload, [await bucket.put_part(key, upload, 1, data)])
    return await bucket.signed_url(key, 300)


async def test_it_says_what_each_recording_holds_and_what_could_not_be_read(
    s3: S3Fake, bucket: Bucket
) -> None:
    question = np.frombuffer(line_pcm("question"), dtype=np.int16)
    spoken = recording(question, seconds=len(question) / RATE + 1.5)
    silent = recording(np.zeros(0, np.int16), seconds=4.0)
    asked = [
        {"call": "call_spoke", "url": await put(bucket, "a.ogg", spoken), "said": ["question"]},
        {"call": "call_silent", "url": await put(bucket, "b.ogg", silent), "said": ["question"]},
        {"call": "call_quiet", "url": await put(bucket, "c.ogg", silent)},
        {"call": "call_gone", "url": f"{s3.url}/{BUCKET}/none.ogg", "said": []},
        {"call": "call_junk", "url": await put(bucket, "d.ogg", b"not an ogg"), "said": []},
    ]
    result = CliRunner().invoke(lab, ["recordings"], input=json.dumps(asked))
    assert result.exit_code == 0, result.output
    spoke, silent_one, quiet, gone, junk = json.loads(result.output)
    assert spoke["call"] == "call_spoke"
    assert (spoke["bytes"], spoke["sha256"]) == (len(spoken), hashlib.sha256(spoken).hexdigest())
    assert spoke["channels"] == 2
    assert spoke["seconds"] == pytest.approx(len(question) / RATE + 1.5, abs=0.05)
    assert spoke["holds"] == pytest.approx(1.0, abs=0.2)  # the line's speech, all of it
    assert spoke["agent_voiced_s"] == 0.0
    assert spoke["error"] is None
    assert silent_one["holds"] == 0.0  # the caller said it; its channel holds none of it
    assert quiet["holds"] is None  # nothing said: nothing to hold
    assert "404" in gone["error"]
    assert gone["bytes"] is None
    assert junk["bytes"] == len(b"not an ogg")
    assert junk["channels"] is None
    assert junk["error"] is not None


@pytest.mark.parametrize(
    "asked", ['{"call": "c", "url": "u"}', "[{}]", "not json", '[{"call": "c", "url": 1}]']
)
def test_a_request_that_is_no_list_of_recordings_is_refused_by_name(asked: str) -> None:
    result = CliRunner().invoke(lab, ["recordings"], input=asked)
    assert result.exit_code == 2
    assert "Invalid value for ASKED" in result.output
