"""A job's offer: the dispatcher's ``JobOffer``, the JSON of its dispatch's metadata.

LiveKit hands a job the metadata of the dispatch that made it (``Job.metadata``,
``livekit/agents/job.py``: ``ctx.job.metadata``); the dispatcher writes a
:class:`~pinecall_contracts.dispatch.JobOffer` there (``libs/contracts``, dispatch.py).
"""

from __future__ import annotations

import msgspec

from pinecall_contracts.base import decode
from pinecall_contracts.dispatch import JobOffer
from pinecall_jobs.errors import OfferUnreadable


def read_offer(metadata: str) -> JobOffer:
    """The JobOffer in ``metadata``; ``OfferUnreadable`` (saying why) when it is not one."""
    if not metadata:
        raise OfferUnreadable("the job's dispatch carries no metadata: not the runtime's offer")
    try:
        return decode(metadata, JobOffer)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise OfferUnreadable(f"the job's metadata is not a JobOffer: {exc}") from exc
