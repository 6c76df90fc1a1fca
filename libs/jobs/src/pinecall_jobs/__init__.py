"""The jobs the worker and the overflow share (seed 000, "Full, at the endpoint", "A worker that
dies"; seed 002, "A deploy never cuts a call").

    offer = read_offer(ctx.job.metadata)           # the dispatcher's JobOffer
    said = await say_sentence(ctx, offer, sentence, log=client)

Layers: ``errors`` ← ``offer`` (a job's JobOffer) ← ``room`` (the job's room: joined with
``ctx.connect()``, or over the lab transport under the LiveKit stand-in; who else is in it) ←
``sentence`` (the sentence job; it deletes the room with :mod:`pinecall_clients.livekit`). What
only the worker or only the overflow does stays with them: the overflow's call back is a ``then``
given to :func:`say_sentence`.
"""

from pinecall_jobs.errors import CallTaken, JobError, OfferUnreadable
from pinecall_jobs.offer import read_offer
from pinecall_jobs.room import Caller, JobRoom
from pinecall_jobs.sentence import Said, Sentence, cartesia_voice, say_sentence

__all__ = [
    "CallTaken",
    "Caller",
    "JobError",
    "JobRoom",
    "OfferUnreadable",
    "Said",
    "Sentence",
    "cartesia_voice",
    "read_offer",
    "say_sentence",
]
