"""Follow-ups as the operator reads them: on each fleet's ``FleetOffers`` (``fleet list``,
``doctor``), per the fleet's environment.

A follow-up is an environment's (its agent's); the fleet serving the environment carries its
counts. An environment with follow-ups and no room nor refusal in the window still gets its
fleet's line (the roster's fleets row names the fleet).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec

from pinecall_contracts.dispatch import FleetOffers
from pinecall_dispatcher.roster import RosterView
from pinecall_dispatcher.store.followups import Counts
from pinecall_dispatcher.store.views import WINDOW_S

__all__ = ["WINDOW_S", "with_followups"]


async def with_followups(
    fleets: Sequence[FleetOffers],
    counts: Mapping[str, Counts],
    roster: RosterView,
    only: str | None = None,
) -> list[FleetOffers]:
    """``fleets`` with their environment's follow-ups (``counts``, by environment); a fleet
    added for an environment that has some and is not among them (``only``: that fleet's)."""
    out = {f.fleet: f for f in fleets}
    by_environment = {f.environment: f.fleet for f in fleets if f.environment}
    for environment, c in counts.items():
        name = by_environment.get(environment)
        if name is None:
            record = await roster.fleet_of(environment)
            if record is None or only not in (None, record.name):
                continue
            name = record.name
            out[name] = FleetOffers(fleet=name, environment=environment, waiting=0)
        out[name] = msgspec.structs.replace(
            out[name],
            followups=c.waiting,
            followups_due=c.due,
            tries=c.tries,
            not_reached=c.not_reached,
        )
    return [out[name] for name in sorted(out)]
