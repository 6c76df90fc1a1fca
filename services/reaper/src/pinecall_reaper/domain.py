"""The reaper's rules, as pure functions of plain values and an explicit ``now``.

Seed 002, "A call nobody is running": "The reaper looks every minute. A call in a room with no
agent left in it, quiet five minutes, is ended as drained and its room taken down. A written call
no process serves is ended as timeout once quiet as long as its endpoint waits: five minutes for a
chat, two hours for WhatsApp." Seed 003: a call runs 30 minutes at most (``MAX_CALL_SECONDS``).
Seed 000, "A worker that dies": "If no job comes, the reaper seals the call after five quiet
minutes" (a call the death handler ended ``drained`` and no sentence job sealed).

*Quiet* is the time since the call's newest entry (``call.ended`` is one, so a call just ended is
not quiet). *No agent left* includes a room LiveKit no longer has: webhooks are best effort, and a
lost ``participant_left`` or ``room_finished`` must not leave a call open for ever (issue 8).

The verdicts, in order: older than the ceiling → end ``timeout``, whoever is in the room; quiet
and no agent → end ``drained`` (cause ``stale``). A call already ended is only sealed (its
outcome and cause stay). Its room, if LiveKit still has it, is taken down with it.

A room no unsealed call names, older than ``quiet_s``, with no agent in it, is taken down: a room
nobody ever joined, or a caller left with nobody after the call was sealed. A younger one may be a
caller the dispatcher is still placing.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Literal

from pinecall_contracts.calls import Channel, EndCause, Outcome

Why = Literal["ceiling", "no_agent", "room_gone", "written_quiet"]
"""Why a call is reaped: older than ``MAX_CALL_SECONDS``; quiet with no agent in its room;
quiet and its room gone from LiveKit; a written call quiet as long as its endpoint waits."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Rules:
    """The numbers, in seconds (the seeds': five minutes quiet, 30 minutes a call)."""

    quiet_s: float = 300.0
    max_call_seconds: float = 1800.0
    chat_quiet_s: float = 300.0
    """A chat quiet this long is ended ``timeout`` (seed 002: five minutes)."""
    whatsapp_quiet_s: float = 7200.0
    """A WhatsApp thread quiet this long is ended ``timeout`` (seed 002: two hours)."""

    def written_quiet_s(self, channel: Channel) -> float:
        """How long ``channel``'s endpoint waits for its contact; ``KeyError`` for a channel
        with no rule."""
        return {"chat": self.chat_quiet_s, "whatsapp": self.whatsapp_quiet_s}[channel]


@dataclass(frozen=True, slots=True, kw_only=True)
class CallSeen:
    """An unsealed call as call-log lists it."""

    call: str
    room: str
    ended: bool
    opened_at: dt.datetime
    last_entry_at: dt.datetime
    channel: Channel | None = None
    """A written call's channel (``chat``, ``whatsapp``): judged by :func:`judge_written`, it
    has no room; None for a voice call."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RoomSeen:
    """A room as LiveKit's ListRooms shows it."""

    name: str
    created_at: dt.datetime
    participants: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    """What to do with a call: end it with ``outcome`` (None: it is ended already), take its
    room down when ``take_room``, then seal it."""

    call: str
    room: str
    why: Why
    outcome: Outcome | None
    take_room: bool
    cause: EndCause | None = None
    """``stale`` beside a ``drained`` outcome: a call nobody runs (``EndCause``)."""


def _seconds(since: dt.datetime, now: dt.datetime) -> float:
    return (now - since).total_seconds()


def over_ceiling(call: CallSeen, now: dt.datetime, rules: Rules) -> bool:
    return _seconds(call.opened_at, now) >= rules.max_call_seconds


def quiet(call: CallSeen, now: dt.datetime, rules: Rules) -> bool:
    return _seconds(call.last_entry_at, now) >= rules.quiet_s


def worth_a_look(call: CallSeen, now: dt.datetime, rules: Rules) -> bool:
    """Whether the call may be reaped now, so its room's participants are worth reading."""
    return over_ceiling(call, now, rules) or quiet(call, now, rules)


def judge(
    call: CallSeen, room: RoomSeen | None, agents: int, now: dt.datetime, rules: Rules
) -> Verdict | None:
    """The verdict on ``call``, whose room is ``room`` (None: LiveKit has no such room) with
    ``agents`` agent participants in it; None leaves it be."""
    if over_ceiling(call, now, rules):
        why: Why = "ceiling"
    elif not quiet(call, now, rules):
        return None
    elif room is None:
        why = "room_gone"
    elif agents == 0:
        why = "no_agent"
    else:
        return None
    outcome: Outcome = "timeout" if why == "ceiling" else "drained"
    return Verdict(
        call=call.call,
        room=call.room,
        why=why,
        outcome=None if call.ended else outcome,
        take_room=room is not None,
        cause="stale" if outcome == "drained" and not call.ended else None,
    )


def unclaimed(
    rooms: Iterable[RoomSeen], claimed: Collection[str], now: dt.datetime, rules: Rules
) -> list[RoomSeen]:
    """The rooms no unsealed call names and older than ``quiet_s``: taken down if no agent is
    in them (an empty one has none, so only the others need their participants read)."""
    return [
        r for r in rooms if r.name not in claimed and _seconds(r.created_at, now) >= rules.quiet_s
    ]


# -- written calls (chat, WhatsApp): no room, no ceiling; quiet as long as the endpoint waits ---

WRITTEN_QUIET_S: dict[Channel, float] = {"chat": 300.0, "whatsapp": 7200.0}
"""How long each written endpoint waits for its contact (seed 002): five minutes, two hours."""


def written_verdict(
    channel: Channel, last_entry_at: dt.datetime, now: dt.datetime, rules: Rules = Rules()
) -> Outcome | None:
    """``timeout`` for a written call no process serves, once quiet as long as its endpoint
    waits (``rules``: the seed's by default); None before. ``KeyError`` for a channel with no
    rule."""
    quiet_s = rules.written_quiet_s(channel)
    return "timeout" if _seconds(last_entry_at, now) >= quiet_s else None


def judge_written(call: CallSeen, now: dt.datetime, rules: Rules = Rules()) -> Verdict | None:
    """The verdict on a written call (``call.channel`` set): once quiet as long as its endpoint
    waits (:func:`written_verdict`), ended ``timeout`` (unless ended) and sealed; its room is
    no LiveKit room, so none is taken down. None leaves it be (a thread quiet an hour is still
    a thread: the 30-minute ceiling of a voice call is not a written call's)."""
    assert call.channel is not None
    if written_verdict(call.channel, call.last_entry_at, now, rules) is None:
        return None
    return Verdict(
        call=call.call,
        room=call.room,
        why="written_quiet",
        outcome=None if call.ended else "timeout",
        take_room=False,
    )
