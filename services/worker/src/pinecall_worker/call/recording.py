"""The ``answer`` job's recording (issue 19): both sides of the call, encoded in the job's
process and uploaded to the environment's bucket as the call goes
(:class:`pinecall_jobs.recording.CallRecording`), its entries on the call's log.

``call.recording_started`` goes on the log as soon as the upload exists (flushed with the next
batch, a second at most), so a job that dies leaves where its parts are; at the end
``call.recording`` or ``call.recording_failed`` goes before the call's end and seal
(:func:`finish`). Only an agent whose definition says ``record`` is recorded.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from livekit.agents import JobContext
from livekit.agents.voice.room_io import RoomIO

from pinecall_clients.bucket import BucketAccess
from pinecall_contracts import entries
from pinecall_contracts.dispatch import JobOffer
from pinecall_jobs.kept import entry_data
from pinecall_jobs.recording import CallRecording
from pinecall_worker.call.record import Recorder
from pinecall_worker.settings import WorkerSettings


async def room_audio(ctx: JobContext, session: Any) -> Callable[[], Awaitable[None]]:
    """Give ``session`` the room's audio in and out before it starts (livekit-agents' RoomIO,
    made as ``AgentSession.start(room=…)`` makes it, closing the session when the caller
    leaves), so :func:`record` wraps it before the first frame; its ``aclose`` to call last."""
    room_io = RoomIO(session, room=ctx.room)
    await room_io.start()
    return room_io.aclose


async def record(
    settings: WorkerSettings, offer: JobOffer, session: Any, recorder: Recorder
) -> CallRecording:
    """Start recording ``session`` into the environment's bucket, its audio input and output set
    and the session not started yet (the caller may speak first); the recording to
    :func:`finish`."""
    recording = CallRecording(
        BucketAccess.of(settings),
        environment=offer.environment,
        org=offer.org,
        call=offer.call,
        job="answer",
    )
    started = await recording.begin(session)
    if started is not None:
        recorder.add(entries.CALL_RECORDING_STARTED, entry_data(started))
    return recording


async def finish(recording: CallRecording | None, recorder: Recorder) -> None:
    """Complete ``recording`` (the session closed) and put what came of it on the log."""
    if recording is None:
        return
    kind, data = await recording.finish()
    recorder.add(kind, data)
