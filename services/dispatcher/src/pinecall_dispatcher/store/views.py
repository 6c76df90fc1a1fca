"""What the operator reads: a call's journal, each fleet's rooms waiting, the rooms kept.

A room *waited* for a worker when it was offered again, went to the overflow after an offer nobody
opened or for a fleet nobody heard, or is still unopened a re-offer's time after it arrived;
``waiting`` counts those that arrived in the last ten minutes (seed 000: "a number that is not 0
is a call that LiveKit or a worker dropped"). A room is *kept* when it is still in offers (waiting
or overflowed, never opened) past ``kept_s``: only a deployment with no replica sweeping leaves
one.
"""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from pinecall_contracts.dispatch import FleetOffers, Journal, JournalLine, KeptRoom
from pinecall_dispatcher.store.tables import JOURNAL, REFUSALS, ROOMS
from pinecall_servicekit import db
from pinecall_servicekit.errors import NotFound

WINDOW_S = 600.0
"""Rooms waiting and refusals are counted over the last ten minutes (seed 000)."""


class ViewStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self._autocommit = db.autocommit(engine)

    async def journal(self, call: str) -> Journal:
        """The call's journal lines, oldest first (none yet for a room admitted and not offered).
        Raises ``NotFound`` for a call the dispatcher has no record of (no room row, no line:
        never rung or admitted here, or pruned a week after it ended), as call-log answers."""
        async with db.translate_errors("reading a journal"), self.engine.connect() as conn:
            rows = (
                await conn.execute(
                    sa.select(JOURNAL)
                    .where(JOURNAL.c.call == call)
                    .order_by(JOURNAL.c.at, JOURNAL.c.id)
                )
            ).all()
            if not rows:
                known = await conn.scalar(sa.select(sa.exists().where(ROOMS.c.call == call)))
                if not known:
                    raise NotFound(f"no call {call}: the dispatcher has no room or offer of it")
        return Journal(
            call=call,
            lines=[
                JournalLine(call=r.call, room=r.room, fleet=r.fleet, at=r.at, line=r.line)
                for r in rows
            ],
        )

    async def fleets(
        self, now: dt.datetime, reoffer_s: float, fleet: str | None = None
    ) -> list[FleetOffers]:
        """Each fleet's rooms waiting in the last ten minutes, rooms in offers now, refusals (of
        ``fleet`` alone when given). Read on psycopg: the sweep reads it every tick for /metrics."""
        params = {
            "since": now - dt.timedelta(seconds=WINDOW_S),
            "unopened_since": now - dt.timedelta(seconds=reoffer_s),
            "fleet": fleet,
        }
        async with (
            db.translate_errors("reading offers"),
            db.driver_connection(self._autocommit) as pg,
        ):
            counted = await (await pg.execute(_ROOMS_COUNTED, params)).fetchall()
            refused = await (await pg.execute(_REFUSALS_COUNTED, params)).fetchall()
        out: dict[str, FleetOffers] = {
            name: FleetOffers(fleet=name, environment=env, waiting=w, in_offers=n)
            for name, env, w, n in counted
        }
        by_reason: dict[str, dict[str, int]] = {}
        for name, reason, count in refused:
            by_reason.setdefault(name, {})[reason] = count
        for name, reasons in by_reason.items():
            base = out.get(name) or FleetOffers(fleet=name, waiting=0)
            out[name] = FleetOffers(
                fleet=name,
                environment=base.environment,
                waiting=base.waiting,
                in_offers=base.in_offers,
                refused=reasons,
            )
        return [out[name] for name in sorted(out)]

    async def kept(self, now: dt.datetime, kept_s: float) -> list[KeptRoom]:
        """Rooms in offers (never opened) past ``kept_s``, the longest kept first."""
        before = now - dt.timedelta(seconds=kept_s)
        async with db.translate_errors("reading kept rooms"), self.engine.connect() as conn:
            rows = (
                await conn.execute(
                    sa.select(ROOMS)
                    .where(
                        ROOMS.c.state.in_(("waiting", "overflow")),
                        ROOMS.c.arrived_at <= before,
                    )
                    .order_by(ROOMS.c.arrived_at)
                    .limit(100)
                )
            ).all()
        return [
            KeptRoom(
                call=r.call,
                room=r.room,
                fleet=r.fleet,
                environment=r.environment,
                state=r.state,
                offers=len(r.tried),
                worker=r.worker,
                arrived_at=r.arrived_at,
                kept_s=round((now - r.arrived_at).total_seconds(), 1),
            )
            for r in rows
        ]


_ROOMS_COUNTED = f"""
SELECT fleet, min(environment),
    count(*) FILTER (WHERE waited OR (
        state IN ('waiting', 'overflow') AND arrived_at <= %(unopened_since)s
    )),
    count(*) FILTER (WHERE state IN ('waiting', 'overflow'))
FROM {ROOMS.fullname}
WHERE arrived_at > %(since)s AND (%(fleet)s::text IS NULL OR fleet = %(fleet)s)
GROUP BY fleet
"""
""":meth:`ViewStore.fleets`' rooms: waited and in offers, by fleet."""

_REFUSALS_COUNTED = f"""
SELECT fleet, reason, count(*) FROM {REFUSALS.fullname}
WHERE at > %(since)s AND (%(fleet)s::text IS NULL OR fleet = %(fleet)s)
GROUP BY fleet, reason
"""
""":meth:`ViewStore.fleets`' refusals in the window, by fleet and reason."""
