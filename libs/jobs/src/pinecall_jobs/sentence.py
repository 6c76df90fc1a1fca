"""The sentence job: one sentence into the room with only a voice, then the room and the call close.

Seed 000, "A worker that dies": the job sent into a dead worker's room "says one sentence, the
overflow's PINECALL_OVERFLOW_SAYS, deletes the room and seals the call", and its writer "follows on
from the dead worker's" count (seed 002, "A deploy never cuts a call": the dispatch carries it,
``JobOffer.written``). The overflow's ``answer`` job is the same sentence on a call nobody opened
yet, which it opens naming itself (seed 000, "Full, at the endpoint").

In order, each step idempotent so a job that dies half way leaves what the reaper finishes:

1. the writer: after ``offer.written``; with none, after the count the log holds (``GET``), or
   from 0 on a call this job opens (``answer``, or a call the log never heard of). A call opened
   by another worker is ``CallTaken``: that worker has the caller, the job says nothing. A log
   that does not answer within 10 s does not keep the caller in silence: the sentence is said,
   nothing is written, the room still goes, and the call is the reaper's;
2. join the room and say the sentence with an ``AgentSession`` that has a voice (Cartesia) and
   nothing else: no ears, no model (``session.say``, awaited to the end of its playout); an
   agent that records (``Sentence.record``) has what the caller hears recorded as any call's
   (issue 19, :class:`pinecall_jobs.recording.CallRecording`, job ``sentence``: its caller's
   channel silent), ``call.recording_started`` written as it begins;
3. ``call.sentence`` ``{"text", "job"}`` on the call's log, counted after the writer's count
   (a 409 means the offer's count was stale: the entry goes once more after the log's count),
   then the sentence's ``call.recording`` (or ``call.recording_failed``), then what a dead
   job left unfinished is kept (:func:`pinecall_jobs.kept.keep_unfinished`);
4. ``then(callers)``: what the job's owner adds (the overflow's call back);
5. end the call with ``outcome`` (nothing changes on a call already ended, as a dead worker's is;
   a 409 says the reaper sealed it first, and only the room is left to close);
6. delete the room (the caller is hung up; DeleteRoom retried for 10 s while LiveKit does not
   answer, then a room left behind is the reaper's); 7. seal the call; the job then shuts down.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from livekit.agents import Agent, AgentSession, JobContext, tts
from livekit.plugins import cartesia

from pinecall_clients.bucket import BucketAccess
from pinecall_clients.calllog import SEAL_WITHIN_S, CallLogClient, CallLogWriter
from pinecall_clients.errors import CallLogRefused, CallLogUnavailable, CallUnknown
from pinecall_clients.livekit import LiveKit, LiveKitAccess
from pinecall_contracts import entries
from pinecall_contracts.calls import CallOpen, EndCause, Outcome
from pinecall_contracts.dispatch import JobOffer
from pinecall_jobs.errors import CallTaken
from pinecall_jobs.kept import entry_data, keep_unfinished
from pinecall_jobs.recording import CallRecording
from pinecall_jobs.room import Caller, JobRoom

_log = logging.getLogger(__name__)

SAID = entries.CALL_SENTENCE
"""The entry kind of the sentence said; ``data``: ``{"text", "job"}``."""
OPEN_WITHIN_S = 10.0
"""Seconds the job retries opening or reading its call before it speaks anyway: the caller
waits in silence while it does."""
DELETE_WITHIN_S = 10.0
"""Seconds DeleteRoom is retried while LiveKit does not answer (a connection error)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Sentence:
    """What a sentence job needs from its process: what to say, with which voice, as whom."""

    says: str
    """``PINECALL_OVERFLOW_SAYS``."""
    worker: str
    """The worker name a call this job opens is opened under (``<fleet>/overflow``)."""
    livekit: LiveKitAccess
    """The LiveKit of the job's room, to delete it."""
    voice: Callable[[], tts.TTS[Any]]
    """Makes the job's text to speech (one per job; closed with it): :func:`cartesia_voice`."""
    lab_rooms: bool = False
    """Under the LiveKit stand-in: join over the lab transport instead of ``ctx.connect()``."""
    recordings: BucketAccess | None = None
    """The environment's recordings' bucket: a dead job's recording left unfinished on the log
    (``call.recording_started``) is completed from the parts it uploaded (issue 19)."""
    record: bool = False
    """Record what the caller hears into ``recordings`` (the agent's definition says
    ``record``: :func:`pinecall_jobs.definition.read_definition`); no bucket then is a
    ``call.recording_failed``, as on any call."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Said:
    """What the job did: the call, whether it opened it, the writer's count after the sentence,
    whether the sentence played to its end, and who was in the room."""

    call: str
    opened: bool
    written: int | None
    """None when the call log did not answer: nothing was written."""
    interrupted: bool
    callers: list[Caller]


def cartesia_voice(
    base_url: str | None, api_key: str | None, *, voice: str | None = None
) -> Callable[[], tts.TTS[Any]]:
    """Cartesia at ``base_url`` (the plugin's default when None; the lab's fake in the lab),
    speaking with ``voice`` (a Cartesia voice id: an agent's; the plugin's default when None)."""
    settings: dict[str, Any] = {"base_url": base_url, "api_key": api_key, "voice": voice}
    given = {k: v for k, v in settings.items() if v is not None}
    return lambda: cartesia.TTS(**given)


async def say_sentence(
    ctx: JobContext,
    offer: JobOffer,
    sentence: Sentence,
    *,
    log: CallLogClient,
    outcome: Outcome = "drained",
    cause: EndCause | None = "lost_agent",
    then: Callable[[list[Caller]], Awaitable[None]] | None = None,
) -> Said:
    """Run the sentence job of ``offer`` in ``ctx``'s room (the steps in the module docstring).

    ``outcome`` ends the call if it is still open (``drained`` for a dead worker's call, with
    ``cause`` ``lost_agent``; ``overflow`` for the overflow's, with no cause). Raises ``CallTaken`` before saying anything. No caller in
    silence: a call log that does not answer (``CallLogUnavailable``) at the start does not stop
    the sentence, and whatever the log answers after it the room is deleted; the log's error is
    raised then, and the call left to the reaper; so is a room LiveKit did not delete
    (``LiveKitUnavailable`` after 10 s of retries, or ``LiveKitRefused``: a key that may not).
    The job shuts down when this returns or raises.
    """
    try:
        try:
            writer: CallLogWriter | None
            writer, opened = await _writer(offer, sentence.worker, log)
        except CallLogUnavailable as exc:
            _log.error(
                "call %s: the call log did not answer (%s); saying it anyway", offer.call, exc
            )
            writer, opened = None, False
        room = await JobRoom.join(ctx, lab_rooms=sentence.lab_rooms)
        recording = _recording(offer, sentence) if writer is not None else None
        interrupted = await _say(room, sentence, recording, writer)
        callers = room.callers()
        sealed = False
        try:
            if writer is not None:
                writer.add(SAID, {"text": sentence.says, "job": offer.job})
                if recording is not None:  # before keep_unfinished, which would keep it
                    writer.add(*await recording.finish())
                await _drain_once_more(writer)
                if sentence.recordings is not None and not opened:
                    await keep_unfinished(log, offer.call, sentence.recordings)
                if then is not None:
                    await then(callers)
                reason = f"the {offer.job} job said its sentence"
                sealed = await _end(log, offer.call, outcome, reason, cause)
        finally:
            await _delete_room(sentence.livekit, offer.room)  # hung up, whatever the log said
        if writer is not None and not sealed:
            await log.seal(offer.call)
        _log.info("call %s: the sentence said (%s), room deleted, sealed", offer.call, offer.job)
        return Said(
            call=offer.call,
            opened=opened,
            written=writer.written if writer is not None else None,
            interrupted=interrupted,
            callers=callers,
        )
    finally:
        ctx.shutdown(f"the {offer.job} job ended")


async def _delete_room(access: LiveKitAccess, room: str) -> None:
    async with LiveKit(access) as livekit:
        if await livekit.delete_room(room, retry_s=DELETE_WITHIN_S):
            _log.info("room %s deleted", room)


async def _writer(offer: JobOffer, worker: str, log: CallLogClient) -> tuple[CallLogWriter, bool]:
    if offer.job == "sentence" and offer.written is not None:
        return _following(log, offer.call, offer.written), False
    if offer.job == "sentence":
        try:
            return _following(
                log, offer.call, (await log.record(offer.call, within_s=OPEN_WITHIN_S)).written
            ), False
        except CallUnknown:
            pass  # a call nobody opened: this job opens it
    opening = CallOpen(
        call=offer.call,
        agent=offer.agent,
        org=offer.org,
        environment=offer.environment,
        room=offer.room,
        worker=worker,
        context=offer.context,
        config=offer.config,
    )
    try:
        record = await log.open(opening, within_s=OPEN_WITHIN_S)
    except CallLogRefused as exc:
        if exc.status == 409:
            raise CallTaken(f"call {offer.call} was opened by another worker: {exc}") from exc
        raise
    return _following(log, offer.call, record.written), True


def _following(log: CallLogClient, call: str, written: int) -> CallLogWriter:
    return log.writer(call, written=written, batch_timeout_s=SEAL_WITHIN_S)


async def _end(
    log: CallLogClient, call: str, outcome: Outcome, reason: str, cause: EndCause | None
) -> bool:
    """End the call; True if it was sealed already (the reaper was first: a 409)."""
    try:
        await log.end(call, outcome, reason=reason, cause=cause)
    except CallLogRefused as exc:
        if exc.status != 409:
            raise
        _log.warning("call %s was sealed before its sentence job ended it: %s", call, exc)
        return True
    return False


def _recording(offer: JobOffer, sentence: Sentence) -> CallRecording | None:
    if not sentence.record:
        return None
    return CallRecording(
        sentence.recordings,
        environment=offer.environment,
        org=offer.org,
        call=offer.call,
        job="sentence",
    )


async def _say(
    room: JobRoom,
    sentence: Sentence,
    recording: CallRecording | None = None,
    writer: CallLogWriter | None = None,
) -> bool:
    """Say the sentence to the end of its playout, ``recording`` it (its start on ``writer``);
    True if it was cut short. The recording is stopped here, finished by the caller."""
    voice = sentence.voice()
    # no ears: nothing can interrupt it, and there is nothing to resume after a false one
    quiet: Any = {"interruption": {"enabled": False, "resume_false_interruption": False}}
    session: AgentSession[Any] = AgentSession(tts=voice, turn_handling=quiet)
    try:
        await room.start(session, Agent(instructions=""))
        if recording is not None and (started := await recording.begin(session)) is not None:
            assert writer is not None
            writer.add(entries.CALL_RECORDING_STARTED, entry_data(started))
        handle = session.say(sentence.says, allow_interruptions=False, add_to_chat_ctx=False)
        await handle
        return handle.interrupted
    finally:
        if recording is not None:
            await recording.stop()  # the file ends with the sentence's playout
        await session.aclose()
        await voice.aclose()


async def _drain_once_more(writer: CallLogWriter) -> None:
    """Drain; a batch a 409 refused (the offer's count was not the log's) goes once more, after
    the count the log said (the writer took it from the 409)."""
    await writer.drain()
    if writer.refused:
        batch, answer = writer.refused[-1]
        _log.warning("call %s: %s; the sentence goes after the log's count", writer.call, answer)
        writer.extend(batch.entries)
        await writer.drain()
