"""Admission's SQL: an org's quota per environment, the calls it holds, the refusals.

A written call (a chat, a WhatsApp thread: :meth:`AdmissionStore.admit_written`) is counted the
same way from the ``written`` table: admitted and not expired, or opened and not ended (for at
most ``written_held_s``); it holds no seat and needs no fleet.

An admission is decided under the org's lock (``pg_advisory_xact_lock`` of org and environment)
and its ``admitted`` row written in the same transaction, so two token requests at the quota's
last call never both pass. An org's calls are its live rows in that environment: admitted and not
expired, waiting, overflowed, or opened within ``max_call_seconds``; a sandbox call never counts against
production, since the environment is part of the count.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from pinecall_contracts.dispatch import Quota
from pinecall_contracts.words import counted
from pinecall_dispatcher.store.tables import QUOTAS, REFUSALS, ROOMS, WRITTEN
from pinecall_servicekit import db
from pinecall_servicekit.errors import TooManyRequests
from pinecall_servicekit.persons import ORGS


def live_calls(
    org: str,
    environment: str,
    now: dt.datetime,
    max_call_seconds: float,
    written_held_s: float = 86_400.0,
) -> Any:
    """The count of ``org``'s calls held in ``environment`` at ``now``: its rooms and its
    written calls."""
    return live_rooms(org, environment, now, max_call_seconds) + live_written(
        org, environment, now, written_held_s
    )


def live_written(org: str, environment: str, now: dt.datetime, held_s: float) -> Any:
    """The count of ``org``'s written calls held in ``environment`` at ``now``."""
    since = now - dt.timedelta(seconds=held_s)
    return (
        sa.select(sa.func.count())
        .select_from(WRITTEN)
        .where(
            WRITTEN.c.org == org,
            WRITTEN.c.environment == environment,
            WRITTEN.c.ended_at.is_(None),
            sa.or_(
                sa.and_(WRITTEN.c.opened_at.is_(None), WRITTEN.c.admitted_until > now),
                WRITTEN.c.opened_at > since,
            ),
        )
        .scalar_subquery()
    )


def live_rooms(org: str, environment: str, now: dt.datetime, max_call_seconds: float) -> Any:
    """The count of ``org``'s rooms held in ``environment`` at ``now``."""
    since = now - dt.timedelta(seconds=max_call_seconds)
    return (
        sa.select(sa.func.count())
        .select_from(ROOMS)
        .where(
            ROOMS.c.org == org,
            ROOMS.c.environment == environment,
            sa.or_(
                sa.and_(ROOMS.c.state == "admitted", ROOMS.c.admitted_until > now),
                ROOMS.c.state.in_(("waiting", "overflow")),
                sa.and_(ROOMS.c.state == "opened", ROOMS.c.opened_at > since),
            ),
        )
        .scalar_subquery()
    )


async def hold_quota(
    conn: AsyncConnection,
    org: str,
    environment: str,
    now: dt.datetime,
    max_call_seconds: float,
    written_held_s: float,
) -> None:
    """Take ``org``'s lock in ``environment`` for the rest of ``conn``'s transaction, and raise
    ``TooManyRequests`` (429) if the org holds its ``concurrent_calls`` there. The quota is the
    dispatcher's row for the org in that environment (``POST /v1/ops/quotas``), else the org's own
    ``concurrent_calls`` (``orgs create --quota``, ``roster.orgs``; it holds in each environment),
    else none: no limit. What the transaction writes next is counted by the next one to take the
    lock."""
    await conn.execute(
        sa.select(
            sa.func.pg_advisory_xact_lock(sa.func.hashtextextended(f"quota:{environment}:{org}", 0))
        )
    )
    quota = (
        await conn.execute(
            sa.select(QUOTAS.c.concurrent_calls).where(
                QUOTAS.c.org == org, QUOTAS.c.environment == environment
            )
        )
    ).scalar()
    if quota is None:
        quota = await org_quota(conn, org)
    if quota is None:
        return
    held = (
        await conn.execute(
            sa.select(live_calls(org, environment, now, max_call_seconds, written_held_s))
        )
    ).scalar_one()
    if held >= quota:
        raise TooManyRequests(
            f"{org} holds {counted(held, 'call')} in {environment}, and its "
            f"concurrent_calls quota there is {quota}"
        )


async def org_quota(conn: AsyncConnection, org: str) -> int | None:
    """The org's own ``concurrent_calls`` (``roster.orgs``' quotas), None for none or no org row."""
    found = await conn.execute(
        sa.select(ORGS.c.quotas["concurrent_calls"].as_integer()).where(ORGS.c.name == org)
    )
    value: int | None = found.scalar()
    return value


class AdmissionStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def admit(
        self,
        row: dict[str, Any],
        now: dt.datetime,
        max_call_seconds: float,
        written_held_s: float = 86_400.0,
    ) -> None:
        """Write the ``admitted`` row of a new call if its org is under its quota in its
        environment (no quota row: no limit). ``TooManyRequests`` (429) otherwise."""
        await self._under_quota(
            sa.insert(ROOMS).values(row), row, now, max_call_seconds, written_held_s
        )

    async def admit_written(
        self,
        row: dict[str, Any],
        now: dt.datetime,
        max_call_seconds: float,
        written_held_s: float,
    ) -> bool:
        """Write the ``written`` row of a new written call (``call``, ``environment``, ``org``,
        ``agent``, ``channel``, ``admitted_until``) if its org is under its quota there;
        ``TooManyRequests`` (429) otherwise. A call admitted before (a retry) is not counted
        again, nor refused: False then, True when this admitted it."""
        async with db.translate_errors("admitting a written call"), self.engine.connect() as conn:
            known = await conn.scalar(sa.select(sa.exists().where(WRITTEN.c.call == row["call"])))
        if known:
            return False
        insert_row = (
            insert(WRITTEN)
            .values(row | {"admitted_at": now})
            .on_conflict_do_nothing(index_elements=[WRITTEN.c.call])
        )
        await self._under_quota(insert_row, row, now, max_call_seconds, written_held_s)
        return True

    async def _under_quota(
        self,
        statement: Any,
        row: dict[str, Any],
        now: dt.datetime,
        max_call_seconds: float,
        written_held_s: float,
    ) -> None:
        org, environment = row["org"], row["environment"]
        async with db.translate_errors("admitting a call"), self.engine.begin() as conn:
            await hold_quota(conn, org, environment, now, max_call_seconds, written_held_s)
            await conn.execute(statement)

    async def written_event(self, call: str, what: str, now: dt.datetime, outcome: str) -> None:
        """``call.opened`` or ``call.ended`` of a written call (nothing for any other call)."""
        values = (
            {"opened_at": now} if what == "opened" else {"ended_at": now, "outcome": outcome[:32]}
        )
        column = WRITTEN.c.opened_at if what == "opened" else WRITTEN.c.ended_at
        async with db.translate_errors("a written call's event"), self.engine.begin() as conn:
            await conn.execute(
                sa.update(WRITTEN).where(WRITTEN.c.call == call, column.is_(None)).values(values)
            )

    async def refused(
        self, now: dt.datetime, environment: str, fleet: str, agent: str, org: str, reason: str
    ) -> None:
        """Count a refusal at admission (intake health: it leaves no call record)."""
        async with db.translate_errors("counting a refusal"), self.engine.begin() as conn:
            await conn.execute(
                sa.insert(REFUSALS).values(
                    at=now,
                    environment=environment,
                    fleet=fleet,
                    agent=agent,
                    org=org,
                    reason=reason,
                )
            )

    async def set_quota(self, quota: Quota) -> Quota:
        async with db.translate_errors("setting a quota"), self.engine.begin() as conn:
            stmt = insert(QUOTAS).values(
                org=quota.org,
                environment=quota.environment,
                concurrent_calls=quota.concurrent_calls,
                updated_at=db.utcnow(),
            )
            await conn.execute(
                stmt.on_conflict_do_update(
                    index_elements=[QUOTAS.c.org, QUOTAS.c.environment],
                    set_={
                        "concurrent_calls": stmt.excluded.concurrent_calls,
                        "updated_at": stmt.excluded.updated_at,
                    },
                )
            )
        return quota

    async def quotas(self) -> list[Quota]:
        async with db.translate_errors("reading quotas"), self.engine.connect() as conn:
            rows = (
                await conn.execute(sa.select(QUOTAS).order_by(QUOTAS.c.org, QUOTAS.c.environment))
            ).all()
        return [
            Quota(org=r.org, environment=r.environment, concurrent_calls=r.concurrent_calls)
            for r in rows
        ]
