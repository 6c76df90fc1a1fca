"""A call's recordings: what the job that records puts on the call's log, and what call-log
hands an app or an operator (issue 19, "Every call recorded in its own process").

A recording is one OGG/Opus file of two channels, the caller left (channel 0) and the agent
right (channel 1): livekit-agents' own recorder's layout (``voice/recorder_io``), which a player
mixes into the call as heard and an analysis reads side by side. It goes to the environment's
bucket over the S3 API as a multipart upload while the call goes on; the entries:

* ``call.recording_started`` (:class:`RecordingStarted`): the upload began; a job that dies
  leaves this on the log, and the job that finishes its call (the dead worker's sentence job)
  completes the parts uploaded so far;
* ``call.recording`` (:class:`Recording`): the object is whole in the bucket;
* ``call.recording_failed`` (:class:`RecordingFailed`): it could not be completed, and why.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Literal

import msgspec

from pinecall_contracts.base import Contract

CHANNELS = ("caller", "agent")
"""The recording's channels in order: the caller's audio left, the agent's right."""
RecordingJob = Literal["answer", "sentence"]


class RecordingStarted(Contract, frozen=True, kw_only=True, tag="recordings.started.v1"):
    """``call.recording_started``: the multipart upload a recording goes into."""

    key: str
    """The object's key in the bucket (``<prefix>/<environment>/<org>/<call>/<job>.ogg``)."""
    upload_id: str
    """The S3 multipart upload's id (CreateMultipartUpload's ``UploadId``)."""
    job: RecordingJob = "answer"
    channels: list[str] = msgspec.field(default_factory=lambda: list(CHANNELS))


class Recording(Contract, frozen=True, kw_only=True, tag="recordings.recording.v1"):
    """``call.recording``: a recording whole in the bucket."""

    url: str
    """``s3://<bucket>/<key>``: where it is; read it through call-log's signed URL."""
    seconds: float
    """Its length, read back from the OGG stream."""
    bytes: int
    sha256: str
    """The SHA-256 of the object's bytes, in hex."""
    channels: list[str] = msgspec.field(default_factory=lambda: list(CHANNELS))
    job: RecordingJob = "answer"
    complete: bool = True
    """False when the job that recorded died and only the parts it had uploaded were kept."""


class RecordingFailed(Contract, frozen=True, kw_only=True, tag="recordings.failed.v1"):
    """``call.recording_failed``: a recording that could not be completed."""

    reason: str
    key: str | None = None
    job: RecordingJob = "answer"
    kept_s: float = 0.0
    """Seconds of it kept in the bucket (0: nothing)."""


class RecordingLink(Contract, frozen=True, kw_only=True, tag="recordings.link.v1"):
    """One recording as call-log hands it: a presigned GET that expires."""

    url: str
    """A presigned ``GetObject`` URL: anyone holding it reads the object until ``expires_at``."""
    expires_at: dt.datetime
    seconds: float
    bytes: int
    sha256: str
    channels: list[str]
    job: RecordingJob
    complete: bool


class RecordingLinks(Contract, frozen=True, kw_only=True, tag="recordings.links.v1"):
    """``GET /v1/calls/{call}/recording``: the call's recordings, in the order they were made."""

    call: str
    recordings: list[RecordingLink]


class RecordingsFailedRequest(
    Contract, frozen=True, kw_only=True, tag="recordings.failed_request.v1"
):
    """The ops verb ``calls.recordings-failed`` over NATS (what ``doctor`` reads): the
    ``call.recording_failed`` entries written in the last ``minutes`` minutes."""

    minutes: Annotated[int, msgspec.Meta(ge=1, le=10_080)] = 60


class RecordingsFailedCount(Contract, frozen=True, kw_only=True, tag="recordings.failed_count.v1"):
    """How many recordings failed since ``since``, by environment, and the newest one's call and
    reason (None when there was none)."""

    since: dt.datetime
    count: int
    environments: dict[str, int] = msgspec.field(default_factory=dict)
    last_call: str | None = None
    last_reason: str | None = None
