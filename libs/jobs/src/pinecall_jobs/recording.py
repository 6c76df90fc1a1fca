"""A call's recording, made in the job's own process and uploaded to the bucket as it goes
(issue 19; seed 000, "Where a call is recorded": the session records, no egress).

**The file.** livekit-agents' own recorder (``livekit.agents.voice.recorder_io.RecorderIO``,
what ``AgentSession.start(record=True)`` uses for LiveKit Cloud) wraps the session's audio input
and output and encodes both on one timeline in a thread of the job's process — with the
caller's side placed by the audio's own time, not by when the job's loop read it
(:class:`pinecall_jobs.pacing.PacedRecorderIO`: a loaded job reads its caller in late bursts,
which the stock recorder squeezed, and the frames still unread when the caller left are
recorded too): an OGG/Opus file
(PyAV's libopus), 48 kHz, two channels, **the caller left, the agent right**. A player mixes the
two into the call as it was heard; anyone reading one side (a transcript, a dispute) takes its
channel alone. The recorder encodes every 2.5 s (``WRITE_INTERVAL``) into a local file in a
temporary folder, written through page by page (:mod:`pinecall_jobs.flushing`: FFmpeg would
otherwise hold its first 256 KiB, ~25 s of the call, off the disk); the file is deleted once
the recording is completed or given up.

**The upload, and what a crash loses.** S3 takes a multipart upload whose parts are at least
5 MiB except the last, at most 10 000 of them, and a part uploaded again under its number
replaces it (``pinecall_clients.bucket``). At the recorder's ~48–96 kb/s, 5 MiB is 7–15 minutes
of a call, so uploading only whole parts would lose everything of a call under that length to a
crash. So the open part (everything after the last 5 MiB boundary) is uploaded again under its
number as it grows: every :data:`EVERY_S` seconds while it is young, then once its age has grown
by a :data:`SHARE`'th, which keeps the bytes sent under ``SHARE`` times the recording's own rate
while a part is open (each send of a part of age *a* costs *a* of audio, sent every *a*/``SHARE``
seconds). Once the open part passes 5 MiB it is frozen and the next one opens. A job that dies
loses at most ``max(EVERY_S, age_of_open_part / SHARE)`` seconds of the end of its call, plus
what the recorder had not written yet: its 2.5 s interval, its 1 s wait on a quiet input and
the OGG page's 1 s (at most ~4 minutes, on a part 15 minutes old; :data:`LOSS_BOUND_S` on a
call under its first 5 MiB, which ``tests/recordings/test_killed.py`` holds it to); the parts it uploaded stay in the upload, which its
``call.recording_started`` entry names, and :func:`pinecall_jobs.kept.keep_uploaded`
completes them.

**The end.** :meth:`CallRecording.finish` closes the recorder, uploads the last part, completes
the upload and answers ``call.recording`` (bytes and sha256 of the file, which is the object,
seconds read back from its OGG stream); a part or the completion refused (after stamina's
retries, :data:`FINISH_WITHIN_S` in all) aborts the upload and answers ``call.recording_failed``
with the reason. Never silently missing: no bucket configured, or an upload that could not
start, is a ``call.recording_failed`` too. A recording that fails never touches the call: the
recorder only reads the audio the session hears and plays.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from livekit.agents import AgentSession
from livekit.agents.voice import io as voice_io

from pinecall_clients.bucket import MIN_PART_BYTES, Bucket, BucketAccess, BucketError, Part
from pinecall_contracts import entries
from pinecall_contracts.recordings import Recording, RecordingFailed, RecordingJob, RecordingStarted
from pinecall_jobs.flushing import flush_each_packet
from pinecall_jobs.kept import entry_data, recording_of
from pinecall_jobs.native import make_thread_safe
from pinecall_jobs.pacing import PacedRecorderIO

_log = logging.getLogger(__name__)

EVERY_S = 5.0
"""Seconds between uploads of the open part while it is young (a crash loses about this)."""
SHARE = 4.0
"""The open part is sent again once its age grew by 1/SHARE: bytes sent ≤ SHARE × the rate."""
LOSS_BOUND_S = EVERY_S + 2.5 + 1.0 + 1.0 + 1.0
"""Seconds of its end a job SIGKILLed in its first 5 MiB loses at most: the pump's interval,
the recorder's write interval, its wait on a quiet input, an OGG page, and a second for the
upload and the scheduling of a busy machine. Except an agent's turn still playing: the
recorder writes nothing past its start until it finished playing (``RecorderIO._write_task``
waits on ``pending_since``, so the agent's audio is placed before the timeline passes it), so a
kill mid-turn loses that turn so far, plus this; and a job whose loop reads its caller late
loses the caller's backlog too (the writer waits for it, :meth:`pinecall_jobs.pacing.
PacedRecorderIO.settled`, rather than write silence where it belongs)."""
FINISH_WITHIN_S = 30.0
"""Seconds the last part and the completion get, retries included (inside the seal's 60 s)."""


class _Silence(voice_io.AudioInput):
    """An input that never yields: the caller's channel of a job that has no ears (the sentence
    job), silent in its recording."""

    def __init__(self) -> None:
        super().__init__(label="Silence")
        self._never = asyncio.Event()

    async def __anext__(self) -> Any:
        await self._never.wait()
        raise StopAsyncIteration


class CallRecording:
    """One job's recording of its call: :meth:`begin` once the session started, :meth:`finish`
    once it closed. ``access`` None: no bucket, and :meth:`finish` says so."""

    def __init__(
        self,
        access: BucketAccess | None,
        *,
        environment: str,
        org: str,
        call: str,
        job: RecordingJob,
        every_s: float = EVERY_S,
    ) -> None:
        self.access, self.job, self.every_s = access, job, every_s
        self.key = access.key(environment, org, call, job) if access is not None else None
        self.call = call
        self.started: RecordingStarted | None = None
        self._failed: str | None = None if access is not None else "no bucket is configured"
        self._bucket: Bucket | None = None
        self._recorder: PacedRecorderIO | None = None
        self._folder: Path | None = None
        self._frozen: list[Part] = []
        self._open_from = 0  # the file offset the open part starts at
        self._open_since = 0.0
        self._sent_at = 0.0
        self._sent_bytes = -1
        self._pump: asyncio.Task[None] | None = None
        self._stopping: asyncio.Future[None] | None = None
        self._lock = asyncio.Lock()

    @property
    def path(self) -> Path | None:
        return self._folder / f"{self.job}.ogg" if self._folder is not None else None

    async def begin(self, session: AgentSession[Any]) -> RecordingStarted | None:
        """Start the upload and the recorder on ``session``'s audio (started already: its
        input and output are wrapped). The ``call.recording_started`` to write, or None when
        it cannot record (said by :meth:`finish`)."""
        if self.access is None or self.key is None:
            return None
        if session.output.audio is None:
            self._failed = "the session has no audio output to record"
            return None
        self._bucket = Bucket(self.access)
        try:
            await self._bucket.__aenter__()
            upload_id = await self._bucket.start_upload(self.key)
        except BucketError as exc:
            self._failed = f"the upload could not start: {exc}"
            await self._close_bucket()
            return None
        self.started = RecordingStarted(key=self.key, upload_id=upload_id, job=self.job)
        self._folder = Path(tempfile.mkdtemp(prefix="pinecall-recording-"))
        flush_each_packet()  # the file grows as it is encoded, so each upload has it so far
        make_thread_safe()  # the encode thread resamples beside the loop's resamplers (.native)
        recorder = PacedRecorderIO(agent_session=session)
        session.input.audio = recorder.record_input(session.input.audio or _Silence())
        session.output.audio = recorder.record_output(session.output.audio)
        assert self.path is not None
        await recorder.start(output_path=self.path)
        self._recorder = recorder
        self._open_since = self._sent_at = time.monotonic()
        self._pump = asyncio.create_task(self._pumping())
        return self.started

    async def _pumping(self) -> None:
        while True:
            await asyncio.sleep(self.every_s)
            age = time.monotonic() - self._open_since
            if time.monotonic() - self._sent_at < max(self.every_s, age / SHARE):
                continue
            try:
                await self._send(last=False)
            except BucketError as exc:  # the next round sends it again; the end says if not
                _log.warning(
                    "call %s: a part of its recording was not uploaded: %s", self.call, exc
                )

    async def _send(self, *, last: bool) -> None:
        """Upload the open part again (all of it, from its start); freeze it at 5 MiB."""
        assert self._bucket is not None
        assert self.started is not None
        assert self.path is not None
        async with self._lock:
            size = self.path.stat().st_size if self.path.exists() else 0
            if size == self._sent_bytes and not last:
                return
            with self.path.open("rb") as file:
                file.seek(self._open_from)
                data = file.read(size - self._open_from)
            if not data and (self._frozen or not last):
                return
            number = len(self._frozen) + 1
            part = await self._bucket.put_part(
                self.started.key, self.started.upload_id, number, data
            )
            self._sent_at, self._sent_bytes = time.monotonic(), size
            if len(data) >= MIN_PART_BYTES and not last:
                self._frozen.append(part)
                self._open_from, self._open_since = size, time.monotonic()
            elif last:
                self._frozen.append(part)

    async def finish(self) -> tuple[str, dict[str, Any]]:
        """Close the recorder, upload the rest, complete; the entry to write: its kind
        (``call.recording`` or ``call.recording_failed``) and data. Never raises for the bucket:
        what it refused is the failure's reason."""
        try:
            if self._failed is not None or self.started is None:
                failed = RecordingFailed(reason=self._failed or "not started", key=self.key,
                                         job=self.job)  # fmt: skip
                return entries.CALL_RECORDING_FAILED, entry_data(failed)
            try:
                async with asyncio.timeout(FINISH_WITHIN_S):
                    return entries.CALL_RECORDING, entry_data(await self._complete())
            except (BucketError, TimeoutError) as exc:
                reason = f"{exc!r}" if isinstance(exc, TimeoutError) else str(exc)
                _log.error("call %s: its recording was not completed: %s", self.call, reason)
                with contextlib.suppress(BucketError, TimeoutError):
                    async with asyncio.timeout(5):
                        assert self._bucket is not None
                        await self._bucket.abort(self.started.key, self.started.upload_id)
                failed = RecordingFailed(reason=reason, key=self.key, job=self.job)
                return entries.CALL_RECORDING_FAILED, entry_data(failed)
        finally:
            await self._close()

    async def _complete(self) -> Recording:
        assert self._bucket is not None
        assert self.started is not None
        assert self.path is not None
        assert self.access is not None
        assert self._recorder is not None
        # shielded: FINISH_WITHIN_S passing cancels this wait, not the recorder's close, which
        # _close waits for again (the job never exits with the encode thread running)
        await asyncio.shield(self.stop())
        await self._send(last=True)
        await self._bucket.complete(self.started.key, self.started.upload_id, self._frozen)
        data = await asyncio.to_thread(self.path.read_bytes)
        return await recording_of(self.access, self.started.key, data, job=self.job, complete=True)

    def stop(self) -> asyncio.Future[None]:
        """Stop recording now, the call over (its caller left, the agent ended it): the file
        ends with the call, not with the job's shutdown, which comes seconds later on a busy
        machine (``up``'s report saw recordings 2.4–3.4 s longer than their calls). What it
        holds is uploaded by :meth:`finish`. Idempotent; the future is done once the recorder
        closed, its encode thread ended (``TimeoutError`` when it did not within
        :data:`pinecall_jobs.pacing.CLOSE_WITHIN_S`, its stack in the log)."""
        if self._stopping is None:  # the file ends now, however late the loop gets to close it
            self._stopping = asyncio.ensure_future(self._stop(time.time()))
        return self._stopping

    async def _stop(self, at: float) -> None:
        if self._pump is not None:
            self._pump.cancel()
            await asyncio.gather(self._pump, return_exceptions=True)
        if self._recorder is not None and self._recorder.recording:
            began = time.monotonic()
            await self._recorder.aclose(at=at)
            _log.info(
                "call %s: its recorder closed and its encode thread ended in %.2f s",
                self.call,
                time.monotonic() - began,
            )

    async def _close(self) -> None:
        with contextlib.suppress(TimeoutError):  # said by the recorder, with its thread's stack
            await self.stop()
        await self._close_bucket()
        if self._recorder is not None and self._recorder.encoding_thread_alive:
            _log.error(  # its file is still open: the folder goes with the process
                "call %s: its recorder's encode thread still runs; %s kept", self.call, self._folder
            )
        elif self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)

    async def _close_bucket(self) -> None:
        bucket, self._bucket = self._bucket, None
        if bucket is not None:
            await bucket.__aexit__(None, None, None)
