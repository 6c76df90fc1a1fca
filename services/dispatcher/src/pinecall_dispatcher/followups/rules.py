"""The follow-ups' rules, pure (issue 18, "Call backs, dialled"; seed 003).

A follow-up is a call back the runtime owes. Each dial of it is a *try*; what a try ends as is
one of :data:`TryOutcome`:

- ``answered``: the callee picked up (the call ended any way but ``not_reached`` or ``failed``);
  the follow-up is done;
- ``not_reached`` (busy, unanswered: LiveKit SIP's status on the log) or ``failed``: the try is
  *burnt*; tried again ``retry_s`` later, given up with that reason after ``most_tries`` burnt;
- ``not_ready``: the line was not ready (the fleet unheard 90 s, or the dial refused for want of a
  seat or the org's quota): retried ``not_ready_s`` (an hour) later, **not burnt** (seed 003: "a
  line that is not ready, so the phone follow-up is retried in an hour instead of being burnt").

A fleet merely full is no try at all: the follow-up waits, and is dialled when a seat frees.
"""

from __future__ import annotations

import datetime as dt
from typing import Literal

import msgspec

TryOutcome = Literal["answered", "not_reached", "failed", "not_ready"]
FollowupState = Literal["waiting", "dialling", "answered", "given_up"]


class FollowupRules(msgspec.Struct, frozen=True, kw_only=True):
    """The follow-ups' numbers (the dispatcher's settings give them)."""

    most_tries: int = 3
    """Burnt tries before a follow-up is given up."""
    retry_s: float = 1800.0
    """Seconds after a try not reached (or failed) before the next."""
    not_ready_s: float = 3600.0
    """Seconds a follow-up waits when its line is not ready (seed 003: an hour)."""


class Next(msgspec.Struct, frozen=True, kw_only=True):
    """What a follow-up becomes after a try ended."""

    state: FollowupState
    burnt: int
    due_in_s: float = 0.0
    given_up: str | None = None


def try_outcome(call_outcome: str | None) -> TryOutcome:
    """A try's outcome from its call's (call-log's ``outcome``; None: never opened)."""
    if call_outcome == "not_reached":
        return "not_reached"
    if call_outcome in (None, "failed"):
        return "failed"
    return "answered"


def after(outcome: TryOutcome, burnt: int, rules: FollowupRules) -> Next:
    """The follow-up after a try that ended ``outcome``, with ``burnt`` tries burnt before it."""
    if outcome == "answered":
        return Next(state="answered", burnt=burnt)
    if outcome == "not_ready":
        return Next(state="waiting", burnt=burnt, due_in_s=rules.not_ready_s)
    burnt += 1
    if burnt >= rules.most_tries:
        return Next(state="given_up", burnt=burnt, given_up=outcome)
    return Next(state="waiting", burnt=burnt, due_in_s=rules.retry_s)


def due(now: dt.datetime, next_: Next) -> dt.datetime:
    """When the follow-up may be dialled again."""
    return now + dt.timedelta(seconds=next_.due_in_s)


def try_key(followup: int, attempt: int) -> str:
    """The try's id, sent with its dial: a dial retried with it places one call (the outbound
    endpoint is idempotent on it), so a try reclaimed after a replica died is still one call."""
    return f"followup-{followup}-{attempt}"
