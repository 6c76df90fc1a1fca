"""Agents' definitions, versioned (the only SQL of them; issue 16, "Agents, as data").

A put is one transaction: it takes a transaction-scoped advisory lock on the agent
(``pg_advisory_xact_lock`` of ``org/environment/name``), reads the latest version, and writes the
next one only when the definition differs. Two puts of one agent on any replica therefore go one
after the other: neither writes a version the other wrote, none is lost, and an identical put
writes nothing. ``PRIMARY KEY (org, environment, name, version)`` stands behind the lock: a bug
in it could never store one version twice. Versions are never updated nor deleted.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import msgspec
import sqlalchemy as sa
from psycopg.rows import namedtuple_row
from sqlalchemy.dialects.postgresql import distinct_on
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from pinecall_call_log.store.tables import AGENT_VERSIONS
from pinecall_contracts.agents import AgentDefinition, AgentVersion
from pinecall_servicekit import db

T = AGENT_VERSIONS.c


LATEST = db.driver_sql(
    sa.text(
        f"""
    SELECT {", ".join(c.name for c in T)} FROM {AGENT_VERSIONS.fullname}
    WHERE org = :org AND environment = :environment AND name = :name
    ORDER BY version DESC LIMIT 1
    """
    )
)
"""An agent's latest version, read at each call's open: on psycopg itself, in autocommit. Its
columns are named, never ``*`` (``lifecycle.HEAD_COLUMNS`` says why)."""


def _version(row: Any) -> AgentVersion:
    return AgentVersion(
        org=row.org,
        environment=row.environment,
        version=row.version,
        updated_at=row.created_at,
        prompt_hash=row.prompt_hash,
        definition=msgspec.convert(row.definition, AgentDefinition),
    )


def _agent(org: str, environment: str, name: str) -> tuple[sa.ColumnElement[bool], ...]:
    return (T.org == org, T.environment == environment, T.name == name)


class DefinitionStore:
    """Every version of every agent, in Postgres."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self._reads = db.autocommit(engine)
        """An agent read at each call's open: one statement, no BEGIN and ROLLBACK around it."""

    async def put(
        self,
        org: str,
        environment: str,
        definition: AgentDefinition,
        prompt_hash: str,
        now: dt.datetime,
    ) -> tuple[AgentVersion, bool]:
        """Store ``definition`` as the agent's next version unless it is the latest's; returns
        the version that stands and whether this put wrote it."""
        stored = msgspec.to_builtins(definition)
        async with db.translate_errors("storing an agent"), self.engine.begin() as conn:
            key = f"agent/{org}/{environment}/{definition.name}"
            await conn.execute(
                sa.select(sa.func.pg_advisory_xact_lock(sa.func.hashtextextended(key, 0)))
            )
            latest = await _latest(conn, org, environment, definition.name)
            if latest is not None and latest.definition == stored:
                return _version(latest), False
            row = (
                await conn.execute(
                    sa.insert(AGENT_VERSIONS)
                    .values(
                        org=org,
                        environment=environment,
                        name=definition.name,
                        version=1 if latest is None else latest.version + 1,
                        definition=stored,
                        prompt_hash=prompt_hash,
                        created_at=now,
                    )
                    .returning(AGENT_VERSIONS)
                )
            ).one()
        return _version(row), True

    async def get(
        self, org: str, environment: str, name: str, version: int | None = None
    ) -> AgentVersion | None:
        """The agent's ``version`` (None: the latest, :data:`LATEST`); None when there is no
        such version."""
        if version is None:
            async with (
                db.translate_errors("reading an agent"),
                db.driver_connection(self._reads) as pg,
                pg.cursor(row_factory=namedtuple_row) as cursor,
            ):
                await cursor.execute(LATEST, {"org": org, "environment": environment, "name": name})
                latest = await cursor.fetchone()
            return None if latest is None else _version(latest)
        query = sa.select(AGENT_VERSIONS).where(
            *_agent(org, environment, name), T.version == version
        )
        async with db.translate_errors("reading an agent"), self._reads.connect() as conn:
            row = (await conn.execute(query)).first()
        return None if row is None else _version(row)

    async def latest(self, org: str, environment: str) -> list[AgentVersion]:
        """The latest version of each of the org's agents in ``environment``, by name."""
        query = (
            sa.select(AGENT_VERSIONS)
            .ext(distinct_on(T.name))
            .where(T.org == org, T.environment == environment)
            .order_by(T.name, T.version.desc())
        )
        async with db.translate_errors("listing agents"), self.engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [_version(r) for r in rows]

    async def count(self, org: str, environment: str, name: str) -> int:
        """How many versions of the agent are stored (for tests and ops)."""
        query = sa.select(sa.func.count()).where(*_agent(org, environment, name))
        async with db.translate_errors("counting an agent's versions"), self.engine.connect() as c:
            return int((await c.execute(query)).scalar_one())


async def _latest(
    conn: AsyncConnection, org: str, environment: str, name: str
) -> sa.Row[Any] | None:
    query = (
        sa.select(AGENT_VERSIONS)
        .where(*_agent(org, environment, name))
        .order_by(T.version.desc())
        .limit(1)
    )
    return (await conn.execute(query)).first()
