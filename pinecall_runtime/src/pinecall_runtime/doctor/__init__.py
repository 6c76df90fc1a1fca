"""``pinecall-runtime doctor``: what is wrong now, one line per thing, and what to do.

Source: ``shared/DESIGN.md``, "The operator's surface": silent fleets, failing workers, rooms kept
in offers past a minute, refusals at admission (intake health), follow-ups waiting and call
backs not reached, dropped webhooks, recordings that failed, stale migrations.

:mod:`.evidence` asks the platform (the services' ops verbs over NATS, webhook-ingest's drops
stream, ``$SRV.PING``, each installed service's version table), each question bounded, a
service that does not answer being a finding and never a crash; :mod:`.findings` holds what was
said; the rules (:mod:`.fleets`, :mod:`.intake`, :mod:`.recordings`, :mod:`.schema`) are pure functions of it;
:mod:`.command` is the click command. :func:`diagnose` runs every rule in the order said.
"""

from __future__ import annotations

from pinecall_runtime.doctor.findings import Evidence, Finding
from pinecall_runtime.doctor.fleets import fleets, services, workers
from pinecall_runtime.doctor.intake import admission, followups, kept_rooms, webhooks
from pinecall_runtime.doctor.recordings import recordings
from pinecall_runtime.doctor.schema import migrations

__all__ = ["Evidence", "Finding", "diagnose"]


def diagnose(evidence: Evidence) -> list[Finding]:
    """Every check's findings, in the order ``doctor`` says them."""
    return [
        *services(evidence),
        *fleets(evidence.roster),
        *workers(evidence.roster),
        *kept_rooms(evidence.offers, evidence.roster),
        *admission(evidence.offers),
        *followups(evidence.offers),
        *webhooks(evidence.drops),
        *recordings(evidence.recordings_failed),
        *migrations(evidence.migrations),
    ]
