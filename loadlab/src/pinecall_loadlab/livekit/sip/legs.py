"""An outbound SIP leg: the callee it rings, how that phone answers, and the leg's life in a room.

Follows livekit/sip `pkg/sip/outbound.go` (`connectToRoom`, `dialSIP`, `waitClose`,
`closeWithTimeout`), `pkg/sip/errors.go` (`classifyInviteError`), `pkg/sip/participant.go`
(`CallStatus.Attribute`, `DisconnectReason`) and livekit/protocol `livekit/sip.go`
(`sipCodeToGRPCCode`, `TwirpErrorMeta`):

1. the SIP participant joins the room at once with ``sip.callStatus`` ``dialing``;
2. a ``180 Ringing`` turns it to ``ringing`` (a callee that fails at once — 404, 5xx — never
   rings);
3. the callee's final answer: ``200`` → ``active`` (media flows both ways); a failure → the
   participant leaves with the reason LiveKit gives that status and the waiting
   ``CreateSIPParticipant`` fails with the Twirp code of `sipCodeToGRPCCode` and
   ``{"sip_status_code", "sip_status"}`` meta; no answer within the ringing timeout →
   ``canceled`` "sip request timed out" (no SIP status), USER_UNAVAILABLE;
4. once answered: the callee's BYE → ``hangup``, CLIENT_INITIATED; no media for
   `StandInConfig.sip_media_timeout_s` (a BYE that was lost, RTP that stopped) → the leg closes
   with "media-timeout", UNKNOWN_REASON; the room removing the participant ends the leg too.

The callee hears: every audio frame relayed to the leg is counted per sender with when the
first arrived (`Leg.heard`), so a test can ask who spoke first. The callee says nothing.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from livekit.protocol import models

from pinecall_loadlab.livekit import events as ev
from pinecall_loadlab.livekit.twirp import TwirpError

if TYPE_CHECKING:
    from pinecall_loadlab.livekit.rooms import Participant, Room, RoomManager

log = logging.getLogger(__name__)

Reason = models.DisconnectReason
STATUS_ATTR = "sip.callStatus"

REASONS = {
    200: "OK",
    403: "Forbidden",
    404: "Not Found",
    408: "Request Timeout",
    480: "Temporarily Unavailable",
    486: "Busy Here",
    487: "Request Terminated",
    488: "Not Acceptable Here",
    500: "Server Internal Error",
    503: "Service Unavailable",
    600: "Busy Everywhere",
    603: "Decline",
    604: "Does Not Exist Anywhere",
}
"""RFC 3261 §21 reason phrases the callee sends with its final answer."""

NO_ANSWER = 0
"""A callee's ``answer`` that never comes: it rings until the ringing timeout."""


def twirp_code(sip_status: int) -> str:
    """The Twirp code LiveKit answers a failed INVITE's `sip_status` with (`sipCodeToGRPCCode`,
    then gRPC → Twirp as psrpc maps it)."""
    named = {
        403: "permission_denied",
        404: "not_found",
        408: "deadline_exceeded",
        480: "resource_exhausted",
        486: "resource_exhausted",
        487: "aborted",
        600: "resource_exhausted",
        603: "permission_denied",
        604: "not_found",
        504: "deadline_exceeded",
    }
    if sip_status in named:
        return named[sip_status]
    return "failed_precondition" if 500 <= sip_status < 600 else "invalid_argument"


def disconnect_reason(sip_status: int) -> int:
    """The participant's `DisconnectReason` for a failed INVITE (`classifyInviteError`)."""
    if sip_status in (403, 486, 488) or 600 <= sip_status < 700:
        return Reason.USER_REJECTED
    if 500 <= sip_status < 600:
        return Reason.SIP_TRUNK_FAILURE
    return Reason.USER_UNAVAILABLE


@dataclass(frozen=True, kw_only=True)
class Callee:
    """How the phone at the far end of an outbound leg behaves (the lab's choice, not LiveKit's).

    `answer`: the final SIP status it sends (200 picks up; 486 busy; 480, 404, 603, 503…; 0 never
    answers). `ring_s`: seconds it rings first (a slow answer is a long ring). `hangup_after_s`:
    once answered, it hangs up after this many seconds. `bye_lost`: that hang-up's BYE never
    reaches LiveKit SIP, so the leg stays until the media timeout. `media_stops_after_s`: once
    answered, its RTP stops after this many seconds (no BYE): the media timeout follows."""

    answer: int = 200
    ring_s: float = 0.2
    hangup_after_s: float | None = None
    bye_lost: bool = False
    media_stops_after_s: float | None = None

    def __post_init__(self) -> None:
        if self.answer != NO_ANSWER and not (self.answer == 200 or 300 <= self.answer < 700):
            raise ValueError(f"answer must be 0, 200 or a failure (300-699), not {self.answer}")
        for name in ("ring_s", "hangup_after_s", "media_stops_after_s"):
            value = getattr(self, name)
            if value is not None and not 0 <= value < 86_400:
                raise ValueError(f"{name} must be seconds from 0 to a day, not {value!r}")


MAGIC_PREFIX = "+15005550"


def magic_callee(number: str) -> Callee | None:
    """The lab's test numbers (as Twilio's ``+1500555…`` magic numbers): ``+15005550`` followed
    by three digits answers with that SIP status — ``+15005550486`` is busy, ``+15005550480``
    unavailable, ``+15005550503`` a trunk failure, ``+15005550000`` never answers,
    ``+15005550200`` picks up. None for any other number."""
    if not number.startswith(MAGIC_PREFIX) or len(number) != len(MAGIC_PREFIX) + 3:
        return None
    digits = number[len(MAGIC_PREFIX) :]
    if not digits.isdigit():
        return None
    try:
        return Callee(answer=int(digits))
    except ValueError:
        return None


@dataclass
class Heard:
    """One sender's audio as the callee heard it: first frame's Unix time and bytes in all."""

    first_at: float
    bytes: int = 0


@dataclass(eq=False, kw_only=True)
class Leg:
    """One outbound call: the SIP participant's link into its room and the callee's side."""

    call_id: str
    room: Room
    participant: Participant
    callee: Callee
    ringing_timeout_s: float
    max_call_s: float | None
    rooms: RoomManager
    media_timeout_s: float
    status: str = "dialing"
    sip_status: int = 0
    how: str = ""
    heard: dict[str, Heard] = field(default_factory=dict)
    answered: asyncio.Future[None] = field(init=False)
    _gone: asyncio.Event = field(default_factory=asyncio.Event)
    _bye: asyncio.Event = field(default_factory=asyncio.Event)
    _media_stop: asyncio.Event = field(default_factory=asyncio.Event)
    _reason: int = Reason.UNKNOWN_REASON

    def __post_init__(self) -> None:
        self.answered = asyncio.get_running_loop().create_future()
        self.answered.add_done_callback(lambda f: f.exception() if not f.cancelled() else None)

    # -- rooms.Link / rooms.Ears ---------------------------------------------------------------

    def presence(self, event: str, info: models.ParticipantInfo) -> None:
        """Others come and go; a phone leg does not care."""

    def removed(self, reason: int) -> None:
        """The room let the participant go (RemoveParticipant, DeleteRoom): LiveKit SIP sends
        BYE (or CANCEL while ringing) and the leg ends."""
        self._reason = reason
        self._gone.set()

    def audio(self, sender: str, pcm: bytes) -> None:
        if self.status != "active" or self._media_stop.is_set():
            return  # no media before the answer, nor after the callee's side went silent
        heard = self.heard.setdefault(sender, Heard(first_at=time.time()))
        heard.bytes += len(pcm)

    # -- faults --------------------------------------------------------------------------------

    def hang_up(self, *, bye_lost: bool = False) -> None:
        """The callee hangs up now; with `bye_lost` its BYE never arrives (media timeout
        follows)."""
        if bye_lost:
            self._media_stop.set()
        else:
            self._bye.set()

    def stop_media(self) -> None:
        """The callee's RTP stops without a BYE (media timeout follows)."""
        self._media_stop.set()

    # -- the leg's life ------------------------------------------------------------------------

    async def _wait(self, seconds: float | None, *events: asyncio.Event) -> asyncio.Event | None:
        """The first of `events` set within `seconds` (None waits without end), else None."""
        waits = {asyncio.ensure_future(e.wait()): e for e in events}
        try:
            done, _ = await asyncio.wait(waits, timeout=seconds, return_when="FIRST_COMPLETED")
        finally:
            for w in waits:
                w.cancel()
        return waits[next(iter(done))] if done else None

    def _set_status(self, status: str) -> None:
        self.status = status
        self.rooms.set_attributes(self.room, self.participant, {STATUS_ATTR: status})

    def _fail(self, how: str, sip_status: int, err: TwirpError, reason: int) -> None:
        self.how, self.sip_status = how, sip_status
        if not self.answered.done():
            self.answered.set_exception(err)
        self.rooms.remove(self.room, self.participant, reason)

    async def run(self) -> None:
        """Ring, get the callee's answer, carry the call until it ends; the outcome goes to the
        events log as `SipCallEnded`."""
        try:
            await self._dial()
            if self.status == "active":
                await self._talk()
        finally:
            if not self.how:
                self.how = "removed"
            if not self.answered.done():
                self.answered.set_exception(
                    TwirpError("canceled", "call cancelled: the participant left the room")
                )
            reason = self.participant.info.disconnect_reason or self._reason
            self.rooms.dispatcher.events.append(
                ev.SipCallEnded(
                    call_id=self.call_id,
                    room=self.room.name,
                    how=self.how,
                    sip_status=self.sip_status,
                    answered=self.sip_status == 200,
                    reason=reason,
                )
            )

    async def _dial(self) -> None:
        answer = self.callee.answer
        rings = answer in (200, NO_ANSWER) or answer in (480, 486, 487, 600, 603)
        if rings:
            self._set_status("ringing")
        ring = self.callee.ring_s if answer != NO_ANSWER else None
        no_answer = ring is None or ring >= self.ringing_timeout_s
        wait = self.ringing_timeout_s if no_answer else ring
        if await self._wait(wait, self._gone) is not None:
            return  # cancelled while ringing: the room removed the participant
        if no_answer:
            err = TwirpError("canceled", "sip request timed out")
            self._fail("no_answer", 0, err, Reason.USER_UNAVAILABLE)
        elif answer == 200:
            self.sip_status = 200
            self._set_status("active")
            self.answered.set_result(None)
        else:
            phrase = REASONS.get(answer, "")
            err = TwirpError(
                twirp_code(answer),
                f"sip status: {answer}: {phrase}",
                {"sip_status_code": str(answer), "sip_status": phrase},
            )
            self._fail("rejected", answer, err, disconnect_reason(answer))

    async def _talk(self) -> None:
        c = self.callee
        timers = {
            "bye": None if c.bye_lost else c.hangup_after_s,
            "silent": min(
                (
                    t
                    for t in (c.hangup_after_s if c.bye_lost else None, c.media_stops_after_s)
                    if t is not None
                ),
                default=None,
            ),
            "max": self.max_call_s,  # `maxCallDuration`: LiveKit SIP hangs up
        }
        due = {k: t for k, t in timers.items() if t is not None}
        first = min(due, key=lambda k: due[k]) if due else None
        got = await self._wait(
            due[first] if first else None, self._gone, self._bye, self._media_stop
        )
        if got is self._gone:
            return
        if got is self._bye or (got is None and first in ("bye", "max")):
            self.how = "hangup"
            self._set_status("hangup")
            self.rooms.remove(self.room, self.participant, Reason.CLIENT_INITIATED)
            return
        self._media_stop.set()  # from here the callee hears nothing either
        if await self._wait(self.media_timeout_s, self._gone) is None:
            self.how = "media_timeout"
            self.rooms.remove(self.room, self.participant, Reason.UNKNOWN_REASON)
