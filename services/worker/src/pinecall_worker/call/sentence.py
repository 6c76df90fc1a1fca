"""The ``sentence`` job on a worker: the overflow's one sentence into the room of a worker that
died (seed 000, "A worker that dies"), run by the job the worker and the overflow share
(:func:`pinecall_jobs.say_sentence`: a voice and nothing else, a writer following on from the dead
worker's count, the room deleted, the call sealed). The worker gives it its own voice, LiveKit,
name and call-log key; it records what it says when the agent's definition says ``record``
(issue 19), into the worker's bucket.
"""

from __future__ import annotations

import dataclasses
import logging

from livekit.agents import JobContext

from pinecall_clients.bucket import BucketAccess
from pinecall_clients.calllog import CallLogClient
from pinecall_clients.errors import CallLogError
from pinecall_clients.livekit import LiveKitAccess
from pinecall_contracts.dispatch import JobOffer
from pinecall_jobs import CallTaken, Sentence, cartesia_voice, say_sentence
from pinecall_jobs.definition import read_definition
from pinecall_worker.settings import WorkerSettings

_log = logging.getLogger(__name__)


async def sentence_job(ctx: JobContext, settings: WorkerSettings, offer: JobOffer) -> None:
    """Say the sentence into ``offer.room``, write it after ``offer.written``, delete the room,
    seal the call; what could not be done is logged, and a call left unsealed is the reaper's."""
    sentence = Sentence(
        says=settings.overflow_says,
        worker=ctx.job.agent_name or settings.fleet,
        livekit=LiveKitAccess(
            url=settings.livekit_url,
            api_key=settings.livekit_api_key or "",
            api_secret=settings.livekit_api_secret or "",
        ),
        voice=cartesia_voice(settings.cartesia_url, settings.cartesia_api_key),
        lab_rooms=settings.lab_rooms,
        recordings=BucketAccess.of(settings),
    )
    async with CallLogClient(settings.call_log_url, settings.fleet_key or "") as log:
        definition = await read_definition(offer, log)
        if definition is not None and definition.record:
            sentence = dataclasses.replace(sentence, record=True)
        try:
            await say_sentence(ctx, offer, sentence, log=log)
        except CallTaken as exc:
            _log.warning("call %s: %s; saying nothing", offer.call, exc)
        except CallLogError as exc:
            _log.error("call %s: the sentence was said, the log refused: %s", offer.call, exc)
