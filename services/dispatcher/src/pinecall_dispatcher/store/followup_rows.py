"""A follow-up and a try's outcome as :mod:`pinecall_dispatcher.store.followups` hands them out:
plain values read from its rows (``followups`` and ``followup_tries``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pinecall_dispatcher.followups.rules import Next, TryOutcome


@dataclass(frozen=True, slots=True)
class Followup:
    """A follow-up as the store holds it; ``attempt`` is its try at hand (0: none)."""

    id: int
    environment: str
    agent: str
    org: str
    number: str | None
    call: str | None
    reason: str
    callback_seq: int
    burnt: int
    attempt: int = 0


@dataclass(frozen=True, slots=True)
class Ended:
    """A try's outcome applied: the follow-up's try, its outcome and what it became."""

    followup: Followup
    outcome: TryOutcome
    call: str | None
    status: str | None
    next: Next


def row_followup(r: Any, attempt: int = 0) -> Followup:
    """The follow-up of a ``followups`` row ``r``, at its try ``attempt`` (0: none)."""
    return Followup(
        id=r.id,
        environment=r.environment,
        agent=r.agent,
        org=r.org,
        number=r.number,
        call=r.call,
        reason=r.reason,
        callback_seq=r.callback_seq,
        burnt=r.burnt,
        attempt=attempt,
    )
