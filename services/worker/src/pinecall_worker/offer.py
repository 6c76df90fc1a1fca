"""What a job is for: the ``JobOffer`` its dispatch carries, or one derived from the job.

The dispatcher's dispatch to a worker carries a :class:`~pinecall_contracts.dispatch.JobOffer`
as the job's metadata (``ctx.job.metadata``, a JSON string): the call id, fleet, environment,
room, offer number, job kind, agent, org, the caller's number and the writer's count to follow
on from. A job with none — LiveKit's own dispatch, a room's ``agents`` in a test, metadata that
is not a JobOffer — still answers its caller: its offer is derived from the job (call id = the
LiveKit job id, agent = the fleet's name, the fleet's environment from ``PINECALL_FLEETS``), so
the call is still opened and written on the log. Pure: the worker's main process and its jobs
read a job the same way.
"""

from __future__ import annotations

import datetime as dt
import re

import msgspec

from pinecall_contracts.base import decode
from pinecall_contracts.dispatch import JobOffer

_CALL_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$")


class JobsOffer(msgspec.Struct, frozen=True, kw_only=True):
    """A job's offer and whether it came with the dispatch (``derived`` False) or was made up
    from the job; ``why`` says why a metadata document was not read as an offer."""

    offer: JobOffer
    derived: bool = False
    why: str | None = None


def derived_call_id(job_id: str) -> str:
    """A call id for a job that carries none: the LiveKit job id (``AJ_…``), or ``job_<id>``
    made to fit the call id's pattern."""
    if _CALL_ID.fullmatch(job_id):
        return job_id
    return "job_" + re.sub(r"[^A-Za-z0-9_.:-]", "_", job_id)[:120]


def offer_of_job(
    metadata: str,
    *,
    job_id: str,
    room: str,
    fleet: str,
    environment: str,
    now: dt.datetime,
) -> JobsOffer:
    """The job's offer: ``metadata`` decoded as a JobOffer, or one derived from the job.

    Never raises: a malformed or foreign metadata document (a ``CallRing``, an app's own JSON)
    gives a derived offer and says why in :attr:`JobsOffer.why`.
    """
    why = None
    if metadata.strip():
        try:
            return JobsOffer(offer=decode(metadata, JobOffer))
        except msgspec.MsgspecError as exc:
            why = f"the job's metadata is not a JobOffer: {exc}"
    return JobsOffer(
        offer=JobOffer(
            call=derived_call_id(job_id),
            fleet=fleet,
            environment=environment,
            room=room or job_id,
            attempt=1,
            agent=fleet,
            arrived_at=now,
            context={"job": job_id},
        ),
        derived=True,
        why=why,
    )
