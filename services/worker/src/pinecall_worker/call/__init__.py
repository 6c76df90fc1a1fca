"""The job a worker runs for each call: it reads its offer and does what the offer's job says.

``entrypoint`` is the worker's ``rtc_session``. It reads the dispatch's ``JobOffer`` from
``ctx.job.metadata`` (``pinecall_worker.offer``: a job without one — LiveKit's own dispatch, a
test — still runs, with its call id derived from the job) and dispatches on ``JobOffer.job``, in
the span ``job <kind>`` of the call's trace (from the offer's ``traceparent``; issue 22):

* ``answer``: an AgentSession answers the caller and the call goes on the log (``answer``);
* ``sentence``: the overflow's sentence into a dead worker's room, the room deleted, the call
  sealed (``sentence``, the job it shares with the overflow: ``pinecall_jobs``).

Modules: ``session`` (the pipeline; imports every vendor plugin, so the worker's forkserver
preloads them), ``record`` (the call's log: open, one writer, flush cadence, end, seal),
``agent`` (what the call runs on: its agent's version, over the worker's defaults), ``tools``
(the agent's tools, answered by its app through call-log), ``steer`` (the app's commands and the
call's limit), ``dial`` (an outbound call's phone leg, dialled once the job holds the call),
``answer`` and ``sentence`` (the two jobs).
"""

from __future__ import annotations

import datetime as dt
import logging

from livekit.agents import JobContext
from opentelemetry import trace

from pinecall_jobs import loops
from pinecall_servicekit import calltrace
from pinecall_worker.call.answer import answer
from pinecall_worker.call.sentence import sentence_job
from pinecall_worker.call.session import prewarm
from pinecall_worker.offer import offer_of_job
from pinecall_worker.settings import WorkerSettings

_log = logging.getLogger(__name__)
_tracer = trace.get_tracer(__name__)

__all__ = ["entrypoint", "prewarm"]


async def entrypoint(ctx: JobContext) -> None:
    """Run the job ``ctx`` was given: answer its caller, or say the sentence into its room."""
    settings = WorkerSettings.of_job(ctx.proc)
    read = offer_of_job(
        ctx.job.metadata,
        job_id=ctx.job.id,
        room=ctx.job.room.name,
        fleet=settings.fleet,
        environment=settings.environment(),
        now=dt.datetime.now(dt.UTC),
    )
    if read.why:
        _log.warning("job %s: %s; its call is %s", ctx.job.id, read.why, read.offer.call)
    offer = read.offer
    # the job goes on in its call's trace: from its offer's span, else from its room
    parent = calltrace.from_traceparent(offer.traceparent) or calltrace.call_context(
        offer.environment, offer.room
    )
    attributes = {calltrace.CALL: offer.call, calltrace.ROOM: offer.room, "pinecall.job": offer.job}
    with (
        _tracer.start_as_current_span(f"job {offer.job}", context=parent, attributes=attributes),
        loops.watching("job"),  # a job in a thread; a job process's loop is watched already
    ):
        if offer.job == "sentence":
            await sentence_job(ctx, settings, offer)
        else:
            await answer(ctx, settings, offer)
