"""Follow-ups and their tries in Postgres (the only SQL of them; issue 18).

Any replica may run the dialler. A try is claimed in one transaction: the follow-ups due are
locked ``FOR UPDATE SKIP LOCKED`` (a replica skips what another is claiming), moved to
``dialling`` with ``tries + 1``, and the try's row ``(followup, attempt)`` is inserted, its primary
key the try's claim: one replica holds each try. A try's outcome is applied by the update that
finds it without one, so a ``call.ended`` heard twice (or read back after it was heard) changes
the follow-up once. An environment's seats are dialled into by one replica at a time
(:meth:`FollowupStore.turn`).
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from pinecall_contracts.calls import Callback
from pinecall_dispatcher.followups.rules import FollowupRules, TryOutcome, after, due
from pinecall_dispatcher.store.followup_counts import Counts, counts
from pinecall_dispatcher.store.followup_rows import Ended, Followup, row_followup
from pinecall_dispatcher.store.notes import Note, NoteStore, owe
from pinecall_dispatcher.store.tables import FOLLOWUP_TRIES, FOLLOWUPS
from pinecall_servicekit import db

__all__ = ["Counts", "Ended", "Followup", "FollowupStore"]


class FollowupStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self.notes = NoteStore(engine)
        """The agent-log entries the changes below owe (each kept in its change's
        transaction)."""

    async def newest(self) -> dt.datetime | None:
        """When the newest call back taken was requested (None: none taken)."""
        async with db.translate_errors("reading follow-ups"), self.engine.connect() as conn:
            newest: dt.datetime | None = await conn.scalar(
                sa.select(sa.func.max(FOLLOWUPS.c.requested_at))
            )
        return newest

    async def take(self, callbacks: Sequence[Callback], now: dt.datetime) -> list[Followup]:
        """A follow-up for each call back not taken yet (once per call-log id), due now; the
        ones made by this call."""
        async with db.translate_errors("taking call backs"), self.engine.connect() as conn:
            taken = set(
                await conn.scalars(
                    sa.select(FOLLOWUPS.c.callback_id).where(
                        FOLLOWUPS.c.callback_id.in_([c.id for c in callbacks])
                    )
                )
            )
        callbacks = [c for c in callbacks if c.id not in taken]  # each read again, not made again
        if not callbacks:
            return []
        rows = [
            {
                "callback_id": c.id,
                "environment": c.environment,
                "agent": c.agent,
                "org": c.org,
                "number": c.number,
                "call": c.call,
                "reason": c.reason,
                "callback_seq": c.seq,
                "requested_at": c.requested_at,
                "state": "waiting",
                "due_at": now,
                "updated_at": now,
            }
            for c in callbacks
        ]
        statement = (
            insert(FOLLOWUPS)
            .values(rows)
            .on_conflict_do_nothing(index_elements=["callback_id"])
            .returning(*FOLLOWUPS.c)
        )
        async with db.translate_errors("taking call backs"), self.engine.begin() as conn:
            made = (await conn.execute(statement)).all()
        return [row_followup(r) for r in made]

    @contextlib.asynccontextmanager
    async def turn(self, environment: str) -> AsyncIterator[bool]:
        """Whether this replica has the environment's turn to dial (a session advisory lock,
        tried, not waited for; let go on exit, or by Postgres when the connection dies): one
        replica at a time reads an environment's seats free and dials into them, so two never
        dial one seat twice."""
        key = sa.func.hashtextextended(f"dispatcher.followups/{environment}", 0)
        async with db.translate_errors("taking a turn"), self.engine.connect() as conn:
            held = bool(await conn.scalar(sa.select(sa.func.pg_try_advisory_lock(key))))
            await conn.commit()
            try:
                yield held
            finally:
                if held:
                    await conn.execute(sa.select(sa.func.pg_advisory_unlock(key)))
                    await conn.commit()

    async def due_environments(self, now: dt.datetime) -> list[str]:
        """Environments with a follow-up due now and not dialled."""
        async with db.translate_errors("reading follow-ups"), self.engine.connect() as conn:
            rows = await conn.scalars(
                sa.select(FOLLOWUPS.c.environment)
                .where(FOLLOWUPS.c.state == "waiting", FOLLOWUPS.c.due_at <= now)
                .distinct()
            )
            return sorted(rows)

    async def claim(
        self, environment: str, now: dt.datetime, most: int, replica: str
    ) -> list[Followup]:
        """Claim a try of at most ``most`` follow-ups of ``environment`` due now, the longest
        due first; another replica claiming at once skips these and takes others."""
        if most <= 0:
            return []
        due_now = (
            sa.select(FOLLOWUPS.c.id)
            .where(
                FOLLOWUPS.c.environment == environment,
                FOLLOWUPS.c.state == "waiting",
                FOLLOWUPS.c.due_at <= now,
            )
            .order_by(FOLLOWUPS.c.due_at, FOLLOWUPS.c.id)
            .limit(most)
            .with_for_update(skip_locked=True)
            .cte("due_now")
        )
        claim = (
            sa.update(FOLLOWUPS)
            .where(FOLLOWUPS.c.id.in_(sa.select(due_now.c.id)))
            .values(state="dialling", tries=FOLLOWUPS.c.tries + 1, updated_at=now)
            .returning(*FOLLOWUPS.c)
        )
        async with db.translate_errors("claiming follow-ups"), self.engine.begin() as conn:
            rows = (await conn.execute(claim)).all()
            if rows:
                await conn.execute(
                    sa.insert(FOLLOWUP_TRIES),
                    [
                        {
                            "followup": r.id,
                            "attempt": r.tries,
                            "environment": r.environment,
                            "claimed_at": now,
                            "claimed_by": replica,
                        }
                        for r in rows
                    ],
                )
        return [row_followup(r, r.tries) for r in sorted(rows, key=lambda r: r.id)]

    async def reclaim(self, now: dt.datetime, stale_s: float, replica: str) -> list[Followup]:
        """Tries claimed and not dialled for ``stale_s`` (their replica died between the claim
        and the dial): claimed again here, to be dialled with the same try key."""
        before = now - dt.timedelta(seconds=stale_s)
        stale = (
            sa.select(FOLLOWUP_TRIES.c.followup, FOLLOWUP_TRIES.c.attempt)
            .where(
                FOLLOWUP_TRIES.c.dialled_at.is_(None),
                FOLLOWUP_TRIES.c.outcome.is_(None),
                FOLLOWUP_TRIES.c.claimed_at <= before,
            )
            .limit(50)
            .with_for_update(skip_locked=True)
            .cte("stale")
        )
        taken = (
            sa.update(FOLLOWUP_TRIES)
            .where(
                sa.tuple_(FOLLOWUP_TRIES.c.followup, FOLLOWUP_TRIES.c.attempt).in_(
                    sa.select(stale.c.followup, stale.c.attempt)
                )
            )
            .values(claimed_at=now, claimed_by=replica)
            .returning(FOLLOWUP_TRIES.c.followup, FOLLOWUP_TRIES.c.attempt)
        )
        async with db.translate_errors("reclaiming tries"), self.engine.begin() as conn:
            tries = {r.followup: r.attempt for r in (await conn.execute(taken)).all()}
            if not tries:
                return []
            rows = (
                await conn.execute(sa.select(FOLLOWUPS).where(FOLLOWUPS.c.id.in_(list(tries))))
            ).all()
        return [row_followup(r, tries[r.id]) for r in rows]

    async def dialled(self, f: Followup, call: str, now: dt.datetime, note: Note) -> None:
        """The try's dial answered ``call``; ``note`` owed once (a try dialled again after its
        replica died finds it dialled and owes nothing more)."""
        async with db.translate_errors("writing a try"), self.engine.begin() as conn:
            done = await conn.execute(
                sa.update(FOLLOWUP_TRIES)
                .where(
                    FOLLOWUP_TRIES.c.followup == f.id,
                    FOLLOWUP_TRIES.c.attempt == f.attempt,
                    FOLLOWUP_TRIES.c.dialled_at.is_(None),
                )
                .values(call=call, dialled_at=now)
            )
            if done.rowcount == 1:
                await owe(conn, [note], now)

    async def tried(self, call: str) -> bool:
        """Whether ``call`` is a try's whose outcome is not applied yet."""
        async with db.translate_errors("reading tries"), self.engine.connect() as conn:
            found = await conn.scalar(
                sa.select(FOLLOWUP_TRIES.c.attempt).where(
                    FOLLOWUP_TRIES.c.call == call, FOLLOWUP_TRIES.c.outcome.is_(None)
                )
            )
        return found is not None

    async def ended(
        self,
        f: Followup | None,
        call: str | None,
        outcome: TryOutcome,
        status: str | None,
        now: dt.datetime,
        rules: FollowupRules,
        notes: Callable[[Ended], Sequence[Note]],
    ) -> Ended | None:
        """The try ``f`` (or the one that dialled ``call``) ended ``outcome``: the follow-up
        waits for its next try, is answered, or is given up (:func:`rules.after`), and owes
        ``notes(ended)``. None when the try already had its outcome (or no try dialled
        ``call``)."""
        tries = FOLLOWUP_TRIES.c
        which = (
            sa.and_(tries.followup == f.id, tries.attempt == f.attempt)
            if f is not None
            else tries.call == call
        )
        async with db.translate_errors("ending a try"), self.engine.begin() as conn:
            row = (
                await conn.execute(
                    sa.update(FOLLOWUP_TRIES)
                    .where(which, tries.outcome.is_(None))
                    .values(outcome=outcome, status=status, ended_at=now)
                    .returning(tries.followup, tries.attempt, tries.call)
                )
            ).first()
            if row is None:
                return None
            ended = await self._next(conn, row, outcome, status, now, rules)
            await owe(conn, notes(ended), now)
            return ended

    async def _next(
        self,
        conn: AsyncConnection,
        row: Any,
        outcome: TryOutcome,
        status: str | None,
        now: dt.datetime,
        rules: FollowupRules,
    ) -> Ended:
        current = (
            await conn.execute(
                sa.select(FOLLOWUPS).where(FOLLOWUPS.c.id == row.followup).with_for_update()
            )
        ).one()
        next_ = after(outcome, current.burnt, rules)
        await conn.execute(
            sa.update(FOLLOWUPS)
            .where(FOLLOWUPS.c.id == row.followup)
            .values(
                state=next_.state,
                burnt=next_.burnt,
                due_at=due(now, next_),
                given_up=next_.given_up,
                updated_at=now,
            )
        )
        return Ended(
            followup=row_followup(current, row.attempt),
            outcome=outcome,
            call=row.call,
            status=status,
            next=next_,
        )

    async def give_up(self, f: Followup, reason: str, now: dt.datetime, note: Note) -> bool:
        """Give ``f`` up with ``reason`` (no number to dial, an agent gone), owing ``note``:
        False when it was not waiting or dialling (nothing owed)."""
        async with db.translate_errors("giving up a follow-up"), self.engine.begin() as conn:
            if f.attempt:
                await conn.execute(
                    sa.update(FOLLOWUP_TRIES)
                    .where(
                        FOLLOWUP_TRIES.c.followup == f.id,
                        FOLLOWUP_TRIES.c.attempt == f.attempt,
                        FOLLOWUP_TRIES.c.outcome.is_(None),
                    )
                    .values(outcome="failed", status=reason, ended_at=now)
                )
            done = await conn.execute(
                sa.update(FOLLOWUPS)
                .where(FOLLOWUPS.c.id == f.id, FOLLOWUPS.c.state.in_(("waiting", "dialling")))
                .values(state="given_up", given_up=reason, updated_at=now)
            )
            if done.rowcount == 1:
                await owe(conn, [note], now)
        return done.rowcount == 1

    async def defer(
        self,
        environment: str,
        now: dt.datetime,
        until: dt.datetime,
        note: Callable[[Followup], Note],
    ) -> list[Followup]:
        """The follow-ups of ``environment`` due now, not dialled (their line is not ready):
        due at ``until`` instead, no try burnt; each owes ``note(it)``."""
        async with db.translate_errors("deferring follow-ups"), self.engine.begin() as conn:
            rows = (
                await conn.execute(
                    sa.update(FOLLOWUPS)
                    .where(
                        FOLLOWUPS.c.environment == environment,
                        FOLLOWUPS.c.state == "waiting",
                        FOLLOWUPS.c.due_at <= now,
                    )
                    .values(due_at=until, updated_at=now)
                    .returning(*FOLLOWUPS.c)
                )
            ).all()
            deferred = [row_followup(r) for r in rows]
            await owe(conn, [note(f) for f in deferred], now)
        return deferred

    async def unresolved(self, now: dt.datetime, older_s: float) -> list[tuple[Followup, str]]:
        """Tries dialled ``older_s`` ago or more with no outcome yet, and their calls (their
        ``call.ended`` never heard: core NATS may lose one), the oldest first."""
        before = now - dt.timedelta(seconds=older_s)
        query = (
            sa.select(FOLLOWUPS, FOLLOWUP_TRIES.c.attempt, FOLLOWUP_TRIES.c.call.label("dialled"))
            .join(FOLLOWUP_TRIES, FOLLOWUP_TRIES.c.followup == FOLLOWUPS.c.id)
            .where(
                FOLLOWUP_TRIES.c.outcome.is_(None),
                FOLLOWUP_TRIES.c.dialled_at <= before,
            )
            .order_by(FOLLOWUP_TRIES.c.dialled_at)
            .limit(50)
        )
        async with db.translate_errors("reading tries"), self.engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [(row_followup(r, r.attempt), r.dialled) for r in rows]

    async def counts(self, now: dt.datetime, window_s: float) -> dict[str, Counts]:
        """Each environment's follow-ups owed and due, and its tries ended in ``window_s``."""
        return await counts(self.engine, now, window_s)
