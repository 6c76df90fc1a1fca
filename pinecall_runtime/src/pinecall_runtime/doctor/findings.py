"""What ``doctor`` reads and says: the evidence the services gave, and findings, one per line.

A :class:`Finding` names one thing (a service, fleet, worker, call, environment or schema), how
bad it is, what is wrong and what to do. Levels: ``ok``; ``info`` (worth knowing, nothing to
mend: a cordon, a duplicate delivery); ``warn`` (something wrong that callers may feel: a full
fleet, refusals); ``fail`` (mend it now); ``skip`` (not checked, because its source did not
answer; that source is itself a ``fail`` of the ``services`` check).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import msgspec

from pinecall_contracts.dispatch import OffersSnapshot
from pinecall_contracts.fleet import RosterSnapshot
from pinecall_contracts.recordings import RecordingsFailedCount
from pinecall_servicekit.migrations import MigrationStatus

Level = Literal["ok", "info", "warn", "fail", "skip"]
WRONG: frozenset[Level] = frozenset({"warn", "fail"})
"""The levels that make ``doctor`` exit non-zero."""


class Finding(msgspec.Struct, frozen=True, kw_only=True):
    """One line of ``doctor``: a check, how bad, the thing it names, what is wrong, what to do."""

    check: str
    level: Level
    subject: str
    """The thing named: a service, fleet, worker, call, environment or schema."""
    what: str
    todo: str = ""


class Unanswered(msgspec.Struct, frozen=True, kw_only=True):
    """A service (or NATS, or Postgres) that did not answer what ``doctor`` asked, or answered
    with an error."""

    service: str
    asked: str
    """The subject (or the database) asked."""
    problem: str
    """``no replica answered <subject> in 5 s``, or the error it answered with."""
    todo: str


class Drop(msgspec.Struct, frozen=True, kw_only=True):
    """Webhooks of one environment dropped for one reason in the last ten minutes."""

    environment: str
    reason: str
    count: int
    detail: str = ""
    """What the newest of them said."""
    at_least: bool = False
    """The count is the drops stream's cap: there were this many or more."""


class Evidence(msgspec.Struct, frozen=True, kw_only=True):
    """What the platform said when ``doctor`` asked; None where its source did not answer."""

    services: list[str]
    """Every service asked, in the order lines are said."""
    unanswered: list[Unanswered] = []
    roster: RosterSnapshot | None = None
    offers: OffersSnapshot | None = None
    drops: list[Drop] | None = None
    """None when the drops stream was not read (NATS down, or no webhook-ingest ever started)."""
    migrations: dict[str, MigrationStatus | str] | None = None
    """Each installed service's standing, or why it could not be told; None: no database."""
    recordings_failed: RecordingsFailedCount | None = None
    """call-log's count of ``call.recording_failed`` lately; None: it did not answer."""


def ok(check: str, what: str) -> Finding:
    """The one line of a check that found nothing wrong."""
    return Finding(check=check, level="ok", subject=check, what=what)


def skip(check: str, source: str) -> Finding:
    """The one line of a check whose source did not answer."""
    return Finding(
        check=check, level="skip", subject=check, what=f"not checked: {source} did not answer"
    )


def wrong(findings: Sequence[Finding]) -> bool:
    """Whether any finding is a warning or a failure (``doctor``'s exit code)."""
    return any(f.level in WRONG for f in findings)
