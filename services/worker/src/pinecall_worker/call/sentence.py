"""The ``sentence`` job: the overflow's one sentence into the room of a worker that died.

Seed 000, "A worker that dies": the runtime ends the dead worker's call drained and offers its
room again as ``JobOffer(job="sentence", written=<the log's count>)``. This job says
``PINECALL_OVERFLOW_SAYS`` into the room with an AgentSession that has only a voice (Cartesia;
no ears, no model), writes ``call.sentence`` through a writer that follows on from the dead
worker's count (so the log stays one ordered record), deletes the room (livekit-api's
DeleteRoom, which hangs up a SIP caller) and seals the call. Its own module, so it can move into
a library the overflow shares.

Every step is bounded and the job always ends; what could not be done is logged, and a call
left unsealed is the reaper's.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from livekit import api
from livekit.agents import Agent, AgentSession, JobContext
from livekit.agents.voice import room_io

from pinecall_clients.calllog import SEAL_WITHIN_S, CallLogClient
from pinecall_clients.errors import CallLogError
from pinecall_contracts import entries
from pinecall_contracts.dispatch import JobOffer
from pinecall_worker.call.session import voice
from pinecall_worker.settings import WorkerSettings

_log = logging.getLogger(__name__)

SAY_WITHIN_S = 60.0
"""The sentence, from the job's start to its last audio out, at most (seconds)."""


async def say_sentence(ctx: JobContext, settings: WorkerSettings, offer: JobOffer) -> None:
    """Say the sentence into ``offer.room``, write it, delete the room, seal the call."""
    client = CallLogClient(settings.call_log_url, settings.fleet_key or "")
    writer = client.writer(offer.call, written=offer.written or 0)
    session: AgentSession[Any] = AgentSession(tts=voice(settings))
    text = settings.overflow_says
    try:
        async with asyncio.timeout(SAY_WITHIN_S):
            await _start(ctx, settings, session)
            await session.say(text, allow_interruptions=False)
        writer.add(entries.CALL_SENTENCE, {"text": text})
    except Exception as exc:  # a vendor, the room or the time failed: still hang up
        _log.error("call %s: the sentence was not said: %r", offer.call, exc)
        writer.add(entries.CALL_ERROR, {"source": "tts", "what": repr(exc), "recoverable": False})
    finally:
        await session.aclose()
    try:
        async with asyncio.timeout(SEAL_WITHIN_S):
            await writer.drain()
    except (TimeoutError, CallLogError) as exc:
        _log.error("call %s: the sentence's entries were not written: %r", offer.call, exc)
    await _delete_room(settings, offer)
    try:
        await client.seal(offer.call, "drained")
    except CallLogError as exc:
        _log.error("call %s: not sealed: %s", offer.call, exc)
    finally:
        await client.aclose()
        ctx.shutdown("sentence said")


async def _delete_room(settings: WorkerSettings, offer: JobOffer) -> None:
    """DeleteRoom on the worker's LiveKit: every participant leaves, a SIP caller is hung up."""
    lk = api.LiveKitAPI(settings.livekit_url, settings.livekit_api_key, settings.livekit_api_secret)
    try:
        await lk.room.delete_room(api.DeleteRoomRequest(room=offer.room))
    except api.TwirpError as exc:  # a room already gone is what we wanted
        if exc.code != api.TwirpErrorCode.NOT_FOUND:
            _log.error("call %s: room %s not deleted: %s", offer.call, offer.room, exc)
    except Exception as exc:  # the connection: the reaper takes the room down later
        _log.error("call %s: room %s not deleted: %r", offer.call, offer.room, exc)
    finally:
        await lk.aclose()


async def _start(ctx: JobContext, settings: WorkerSettings, session: AgentSession[Any]) -> None:
    agent = Agent(instructions="You say one sentence and hang up.")
    if settings.lab_rooms:
        from pinecall_labroom.agents import LabAudioOutput
        from pinecall_labroom.jobs import join_job_room

        room = await join_job_room(ctx)
        session.output.audio = LabAudioOutput(room)
        await session.start(agent)
    else:
        options = room_io.RoomOptions(audio_input=False, close_on_disconnect=False)
        await session.start(agent, room=ctx.room, room_options=options)
