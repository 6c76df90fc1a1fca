"""One job of the overflow: an ``answer`` offer (a call no worker could take) or a ``sentence``
offer (a dead worker's room, when its fleet is full), both the sentence job of
:mod:`pinecall_jobs`.

An ``answer`` job opens the call naming ``<fleet>/overflow``, says the sentence, writes the
caller's number onto the agent's log as ``callback.requested`` (``POST /v1/callbacks``: the
number from the JobOffer, else the SIP participant's ``sip.phoneNumber``), ends the call
``overflow``, deletes the room and seals the call (seed 000, "Full, at the endpoint"). A web
visitor has no number: the page was offered a call back at the endpoint, and none is written.
An outbound call (issue 18) is not dialled by the overflow: it ends ``not_reached``, with no
sentence and no call back (:func:`not_dialled`).

Either job speaks in **the agent's voice** (issue 16: "the overflow reads the agent from
here"): the offer's agent is read from call-log with the fleet key (``GET /v1/agents/{agent}``,
its environment's) before the job opens the call, and its definition's ``voice`` given to
Cartesia, so the caller hears the sentence in the voice of the agent it rang (a dead worker's
caller, in the voice it was talking to). An agent with no voice of its own, none defined, or a
call-log that does not answer in time (:func:`pinecall_jobs.definition.read_definition`): the
overflow's own voice. An agent whose definition says ``record`` has the sentence recorded into
the overflow's bucket (``PINECALL_RECORDINGS_*``, as the worker's; issue 19), and a dead
worker's recording left unfinished is kept from its parts. Nothing is remembered
between jobs: each job runs in a thread and an event loop of its own, and one read is small
beside the call's open, entries, end and seal. The agent's ``language`` is not given: the
sentence is one text in the operator's language (``PINECALL_OVERFLOW_SAYS``), and speech is
made in the language of its text; a definition's language says the agent's, not the sentence's.

The job runs in the span ``job <kind>`` of its call's trace, from its offer's ``traceparent``
(issue 22, "One trace per call"), so its call-log requests are in that trace.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import anyio._backends._asyncio  # noqa: F401  (httpx's first request, else in a job's thread)
import httpcore  # noqa: F401  (httpx imports it at its first client: 0.5-0.9 s in up's overflow log)
from livekit.agents import JobContext
from livekit.agents.utils import http_context
from opentelemetry import trace

from pinecall_clients.bucket import BucketAccess
from pinecall_clients.calllog import CallLogClient
from pinecall_clients.errors import CallLogRefused
from pinecall_clients.livekit import LiveKit, LiveKitAccess
from pinecall_contracts.agents import AgentDefinition
from pinecall_contracts.calls import CallOpen, callback_of
from pinecall_contracts.dispatch import JobOffer
from pinecall_contracts.ids import overflow_name
from pinecall_jobs import (
    Caller,
    CallTaken,
    OfferUnreadable,
    Sentence,
    cartesia_voice,
    loops,
    read_offer,
    say_sentence,
)
from pinecall_jobs.definition import read_definition
from pinecall_overflow.settings import OverflowSettings
from pinecall_servicekit import calltrace

# livekit-agents' shared aiohttp session (Cartesia's) builds its TLS context, cached per process,
# at its first use: a sentence job's loop then (up's overflow log: 126 ms in
# ssl.create_default_context); made here, at import, as the worker's session module does
http_context._create_ssl_context()

_log = logging.getLogger(__name__)
_tracer = trace.get_tracer(__name__)

REASON = "the overflow answered: no seat for the call"


def sentence_of(settings: OverflowSettings, definition: AgentDefinition | None = None) -> Sentence:
    """The sentence job's needs: speaking with ``definition``'s voice (None, or no voice: the
    overflow's own), recording what it says into the settings' bucket when it says ``record``."""
    voice = definition.voice or None if definition is not None else None
    return Sentence(
        says=settings.overflow_says,
        worker=overflow_name(settings.fleet),
        livekit=LiveKitAccess(
            url=settings.livekit_url,
            api_key=settings.livekit_api_key or "",
            api_secret=settings.livekit_api_secret or "",
        ),
        voice=cartesia_voice(settings.cartesia_url, settings.cartesia_api_key, voice=voice),
        lab_rooms=settings.lab_rooms,
        recordings=BucketAccess.of(settings),
        record=definition is not None and definition.record,
    )


def callback(offer: JobOffer, log: CallLogClient) -> Callable[[list[Caller]], Awaitable[None]]:
    """What the overflow adds after its sentence: the caller's call back on the agent's log."""

    async def call_back(callers: list[Caller]) -> None:
        number = offer.number or next((c.number for c in callers if c.number), None)
        if number is None:
            _log.info("call %s: no number to call back (a %s caller)", offer.call, offer.caller)
            return
        request = callback_of(offer.agent, number, reason=REASON, call=offer.call)
        entry = await log.callback(request)
        _log.info(
            "call %s: callback.requested at %d on %s's log", offer.call, entry.seq, offer.agent
        )

    return call_back


NOT_DIALLED = "no seat for the call: the phone was not dialled"
"""The reason of an outbound call the overflow was given (``not_reached``)."""


async def not_dialled(
    ctx: JobContext, offer: JobOffer, sentence: Sentence, log: CallLogClient
) -> None:
    """An outbound call given to the overflow (no worker could hold it): nobody was dialled, so
    nobody hears a sentence and nobody is called back; the call is opened naming the overflow,
    ended ``not_reached`` and sealed, and its empty room deleted (the app, or the follow-ups'
    dialler, tries again later: ``pinecall_dispatcher.outbound``)."""
    try:
        try:
            await log.open(
                CallOpen(
                    call=offer.call,
                    agent=offer.agent,
                    org=offer.org,
                    environment=offer.environment,
                    room=offer.room,
                    worker=sentence.worker,
                    context=offer.context | {"caller": offer.caller},
                )
            )
        except CallLogRefused as exc:  # another holds it (a 409): that one dials
            _log.warning("call %s: %s; the overflow leaves it", offer.call, exc)
            return
        await log.end(offer.call, "not_reached", reason=NOT_DIALLED)
        await log.seal(offer.call)
        async with LiveKit(sentence.livekit) as livekit:
            await livekit.delete_room(offer.room, retry_s=10.0)
        _log.info("call %s: outbound, given to the overflow: not dialled", offer.call)
    finally:
        ctx.shutdown("an outbound call the overflow does not dial")


async def entrypoint(settings: OverflowSettings, ctx: JobContext) -> None:
    """The job: read its offer and run it; a job whose metadata is not an offer ends at once."""
    try:
        offer = read_offer(ctx.job.metadata)
    except OfferUnreadable as exc:
        _log.error("job %s in room %s: %s", ctx.job.id, ctx.job.room.name, exc)
        ctx.shutdown("not the runtime's offer")
        return
    # the job goes on in its call's trace: from its offer's span, else from its room
    parent = calltrace.from_traceparent(offer.traceparent) or calltrace.call_context(
        offer.environment, offer.room
    )
    attributes = {calltrace.CALL: offer.call, calltrace.ROOM: offer.room, "pinecall.job": offer.job}
    with (
        _tracer.start_as_current_span(f"job {offer.job}", context=parent, attributes=attributes),
        loops.watching("job"),  # each job's loop, in its thread
    ):
        async with CallLogClient(settings.call_log_url, settings.fleet_key or "") as log:
            sentence = sentence_of(settings, await read_definition(offer, log))
            try:
                if offer.job == "answer" and offer.caller == "outbound":
                    await not_dialled(ctx, offer, sentence, log)
                elif offer.job == "answer":
                    await say_sentence(
                        ctx,
                        offer,
                        sentence,
                        log=log,
                        outcome="overflow",
                        cause=None,
                        then=callback(offer, log),
                    )
                else:
                    await say_sentence(ctx, offer, sentence, log=log)
            except CallTaken as exc:
                _log.warning("call %s: %s; the overflow leaves it", offer.call, exc)
