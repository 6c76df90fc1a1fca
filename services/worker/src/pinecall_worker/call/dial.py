"""An outbound call's phone leg, dialled from the job that holds the call (issue 18).

The dispatcher offers an outbound call like any ring (``pinecall_dispatcher.outbound``); its
JobOffer says ``caller`` ``outbound``, the number (``number``) and the outbound trunk
(``sip_trunk``). The job opens the call on the log first — it holds the call, and a job the log
refuses (another holds it) never dials — joins the room, and only then dials:
``CreateSIPParticipant`` with ``wait_until_answered`` (livekit-api's ``SipService``; LiveKit
SIP's ``pkg/sip/outbound.go``), ringing at most ``PINECALL_RINGING_TIMEOUT_S``. Its session is
built once the callee answered, so the first audio the callee hears is the agent's greeting.

What the leg's answer becomes, on the call's log as ``call.dialled``
(:class:`~pinecall_contracts.outbound.Dialled`):

=========================================================  ===================================
LiveKit answers                                            the call
=========================================================  ===================================
the participant (the callee picked up)                     goes on: the agent greets
``SipCallError`` with ``sip_status_code`` (486 busy, 480   ends ``not_reached``, the SIP
or 408 not answered, 603 declined, 5xx failed)             status its reason
``SipCallError`` with no status (LiveKit's ringing         ends ``not_reached``: no answer
timeout, ``sip request timed out``)
another Twirp error (no such trunk, a refused key), or no  ends ``not_reached``, LiveKit's
answer from LiveKit                                        words its reason
=========================================================  ===================================

A call not reached deletes its room as its job shuts down (nobody is left to talk to).
"""

from __future__ import annotations

import logging

import aiohttp
from google.protobuf.duration_pb2 import Duration
from livekit import api
from livekit.agents import JobContext

from pinecall_contracts import entries
from pinecall_contracts.base import to_builtins
from pinecall_contracts.dispatch import JobOffer
from pinecall_contracts.outbound import Dialled, callee_identity
from pinecall_worker.call.record import Recorder

_log = logging.getLogger(__name__)
CALL_ATTRIBUTE = "pinecall.call"
"""The SIP participant's attribute naming its call."""


async def dial(lk: api.LiveKitAPI, offer: JobOffer, ringing_timeout_s: float) -> Dialled:
    """Dial ``offer.number`` into ``offer.room`` through ``offer.sip_trunk`` and wait until it
    is answered or not (at most ``ringing_timeout_s`` of ringing); never raises for a leg not
    answered (the table of the module docstring)."""
    assert offer.number is not None
    to, trunk = offer.number, offer.sip_trunk or ""
    identity = callee_identity(offer.call)
    request = api.CreateSIPParticipantRequest(
        sip_trunk_id=trunk,
        sip_call_to=to,
        room_name=offer.room,
        participant_identity=identity,
        participant_name=to,
        participant_attributes={CALL_ATTRIBUTE: offer.call},
        wait_until_answered=True,
        ringing_timeout=Duration(seconds=max(1, round(ringing_timeout_s))),
    )
    try:
        await lk.sip.create_sip_participant(request)
    except api.SipCallError as exc:
        return Dialled(
            to=to,
            answered=False,
            sip_status_code=exc.sip_status_code,
            sip_status=exc.sip_status or exc.message,
            trunk=trunk,
        )
    except api.TwirpError as exc:
        return Dialled(to=to, answered=False, sip_status=f"{exc.code}: {exc.message}", trunk=trunk)
    except (aiohttp.ClientError, TimeoutError) as exc:
        said = f"LiveKit did not answer: {exc!r}"
        return Dialled(to=to, answered=False, sip_status=said, trunk=trunk)
    return Dialled(to=to, answered=True, trunk=trunk, participant=identity)


def not_reached_reason(dialled: Dialled) -> str:
    """The end's reason of a leg not answered: ``SIP 486 Busy Here``, or LiveKit's words."""
    if dialled.sip_status_code is not None:
        return f"SIP {dialled.sip_status_code} {dialled.sip_status}".rstrip()
    return dialled.sip_status or "not answered"


async def dial_callee(
    ctx: JobContext, offer: JobOffer, recorder: Recorder, ringing_timeout_s: float
) -> bool:
    """Dial the callee of the call ``recorder`` holds, and write the leg on its log
    (``call.dialled``); True once answered. A leg not answered settles the call
    ``not_reached``, deletes its room as the job shuts down, and shuts the job down."""
    dialled = await dial(ctx.api, offer, ringing_timeout_s)
    recorder.add(
        entries.CALL_DIALLED, {k: v for k, v in to_builtins(dialled).items() if k != "type"}
    )
    if dialled.answered:
        _log.info("call %s: %s answered", offer.call, dialled.to)
        return True
    reason = not_reached_reason(dialled)
    _log.info("call %s: %s not reached (%s)", offer.call, dialled.to, reason)
    recorder.settle("not_reached", reason)

    async def delete_room() -> None:
        await ctx.delete_room()

    ctx.add_shutdown_callback(delete_room)
    ctx.shutdown(f"not reached: {reason}")
    return False
