"""The dispatcher's Postgres: tables (:mod:`.tables`), a room's life (:mod:`.rooms`), offers under
the fleet's lock (:mod:`.offers`), admission and quotas (:mod:`.admissions`), outbound calls
(:mod:`.outbound`), the operator's views (:mod:`.views`), phone numbers (:mod:`.numbers`),
follow-ups and their tries (:mod:`.followups`). The only package of the service that speaks SQL;
driver errors leave it as
``StoreUnavailable``.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from pinecall_dispatcher.store.admissions import AdmissionStore
from pinecall_dispatcher.store.followups import FollowupStore
from pinecall_dispatcher.store.numbers import NumberStore
from pinecall_dispatcher.store.offers import FleetOffers, OfferStore
from pinecall_dispatcher.store.outbound import OutboundStore
from pinecall_dispatcher.store.rooms import RoomStore
from pinecall_dispatcher.store.rows import Arrival, RoomRow
from pinecall_dispatcher.store.tables import (
    FOLLOWUP_NOTES,
    FOLLOWUP_TRIES,
    FOLLOWUPS,
    JOURNAL,
    OUTBOUND,
    REFUSALS,
    ROOMS,
    SCHEMA,
    WRITTEN,
)
from pinecall_dispatcher.store.views import ViewStore
from pinecall_servicekit import db
from pinecall_servicekit.migrations import Migrations

__all__ = ["Arrival", "FleetOffers", "RoomRow", "Store", "migrate"]

KEEP_S = 7 * 86_400.0
"""Ended rooms, their journal, refusals, and follow-ups answered or given up are kept a week,
then pruned by the sweep."""


migrate = Migrations(Path(__file__).parent.parent / "migrations", SCHEMA)
"""The dispatcher's migrations: ``migrate(url)`` runs them; the ``pinecall_runtime.migrations`` entry
point, which ``doctor`` also asks where a database stands."""


class Store:
    """Every store of the dispatcher on one engine."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self.rooms = RoomStore(engine)
        self.offers = OfferStore(engine)
        self.admissions = AdmissionStore(engine)
        self.outbound = OutboundStore(engine)
        self.views = ViewStore(engine)
        self.numbers = NumberStore(engine)
        self.followups = FollowupStore(engine)

    async def answers(self, timeout_s: float = 2.0) -> bool:
        """Whether Postgres answers a query within ``timeout_s`` seconds (readiness)."""
        return await db.answers(self.engine, timeout_s)

    async def prune(self, now: dt.datetime, keep_s: float = KEEP_S) -> None:
        """Forget rooms and written calls ended, tokens expired, journal lines, refusals and
        follow-ups done older than ``keep_s``."""
        before = now - dt.timedelta(seconds=keep_s)
        async with db.translate_errors("pruning"), self.engine.begin() as conn:
            gone = sa.or_(
                sa.and_(ROOMS.c.state == "ended", ROOMS.c.ended_at < before),
                sa.and_(ROOMS.c.state == "admitted", ROOMS.c.admitted_until < before),
            )
            await conn.execute(sa.delete(ROOMS).where(gone))
            await conn.execute(
                sa.delete(WRITTEN).where(
                    sa.or_(
                        WRITTEN.c.ended_at < before,
                        sa.and_(WRITTEN.c.opened_at.is_(None), WRITTEN.c.admitted_until < before),
                    )
                )
            )
            await conn.execute(sa.delete(JOURNAL).where(JOURNAL.c.at < before))
            # a request id is one call for a week: a retry after that is a new call
            await conn.execute(sa.delete(OUTBOUND).where(OUTBOUND.c.placed_at < before))
            await conn.execute(sa.delete(REFUSALS).where(REFUSALS.c.at < before))
            done = sa.select(FOLLOWUPS.c.id).where(
                FOLLOWUPS.c.state.in_(("answered", "given_up")), FOLLOWUPS.c.updated_at < before
            )
            await conn.execute(sa.delete(FOLLOWUP_TRIES).where(FOLLOWUP_TRIES.c.followup.in_(done)))
            await conn.execute(sa.delete(FOLLOWUPS).where(FOLLOWUPS.c.id.in_(done)))
            await conn.execute(
                sa.delete(FOLLOWUP_NOTES).where(FOLLOWUP_NOTES.c.written_at < before)
            )
