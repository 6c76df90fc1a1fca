"""The database: SQLAlchemy 2 async on psycopg 3, UTC everywhere, one naming convention.

Each service owns its tables in a schema of its own (``roster``), with alembic migrations under
the service and the version table in that schema (:func:`migrate`), so services migrate
independently (``shared/CONVENTIONS.md`` habit 14). Driver errors become
:class:`~pinecall_servicekit.errors.StoreUnavailable` in :func:`translate_errors`.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import psycopg
import sqlalchemy as sa
from psycopg.pq import TransactionStatus
from sqlalchemy.dialects.postgresql import psycopg as psycopg_dialect
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.util import greenlet_spawn

from pinecall_servicekit.errors import StoreUnavailable, Unprocessable

NAMING_CONVENTION: dict[str, str] = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def metadata(schema: str) -> sa.MetaData:
    """The MetaData of a service's schema, with the shared naming convention."""
    return sa.MetaData(schema=schema, naming_convention=NAMING_CONVENTION)


def utcnow() -> dt.datetime:
    """Now, in UTC, timezone-aware."""
    return dt.datetime.now(dt.UTC)


UTC_TIMESTAMP = sa.DateTime(timezone=True)
"""Every timestamp column: ``timestamptz``, written and read in UTC."""


def sqlalchemy_url(url: str) -> str:
    """A libpq URL (``postgresql://...``) as SQLAlchemy's psycopg 3 URL; others unchanged."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def create_engine(
    url: str, *, pool_size: int = 5, max_overflow: int | None = None, pre_ping: bool = True
) -> AsyncEngine:
    """An async engine on ``url``; sessions run at READ COMMITTED in UTC.

    ``max_overflow`` (default ``pool_size``) connections beyond the pool are opened under bursts
    and closed when returned; a service under steady load sets it to 0 so it never pays for a
    connection (and a Postgres backend) per burst. ``pre_ping`` tests each connection as it is
    taken from the pool (one round trip more a transaction); a service whose every operation is
    retried anyway (a redelivered event, the next sweep) turns it off, and a connection lost with
    its server is then found by the statement that fails, and the pool made anew.
    """
    return create_async_engine(
        sqlalchemy_url(url),
        pool_size=pool_size,
        max_overflow=pool_size if max_overflow is None else max_overflow,
        pool_pre_ping=pre_ping,
        connect_args={"options": "-c timezone=UTC"},
    )


def autocommit(engine: AsyncEngine) -> AsyncEngine:
    """``engine``'s pool with each statement its own transaction (psycopg's autocommit).

    For reads: at READ COMMITTED each statement of a transaction takes its own snapshot anyway,
    so the BEGIN psycopg sends before a statement and the ROLLBACK after it are two round trips
    that buy nothing (a reading ``engine.connect()`` is three round trips, this one; issue 20's
    profile of call-log). Never for writes: a statement still waiting on a lock when its process
    dies commits once the lock is let go, where in a transaction it dies with the process
    (call-log's ``tests/test_kill.py``); nor ``FOR UPDATE``: ``begin()`` on it starts none.
    SQLAlchemy sets autocommit on each connection it lends and resets it when it is returned
    (``isolation_level="AUTOCOMMIT"``, docs "Setting Transaction Isolation Levels including DBAPI
    Autocommit")."""
    return engine.execution_options(isolation_level="AUTOCOMMIT")


@asynccontextmanager
async def driver_connection(engine: AsyncEngine) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    """psycopg's own connection, lent by ``engine``'s pool, for a hot path's statements: SQL
    with psycopg's ``%(name)s`` placeholders (a module's constant; :func:`driver_sql` compiles a
    SQLAlchemy statement to one). Through :func:`autocommit`'s engine each statement is its own
    transaction, one round trip where ``BEGIN``, the statement and ``COMMIT`` are three: for a
    change that is one statement whole and may commit after its process died (one that names
    the state it leaves, so a retry changes nothing), and for reads. Otherwise see
    :func:`driver_transaction`.

    What it saves is SQLAlchemy's statement execution and the greenlet each of its awaits takes
    (issue 20: a transaction costs the client 0.48 ms of CPU so, 0.92 through SQLAlchemy's
    ``AsyncEngine``, ``bench/request_floor.py``). psycopg prepares a statement run five times
    (``prepare_threshold``). Raises psycopg's errors, which :func:`translate_errors` turns into
    the platform's as it does SQLAlchemy's. A connection left unusable (lost, or in a
    transaction after a cancellation) is invalidated before the pool's reset meets it, so the pool
    makes a new one rather than lend it again; a connection lost also marks every connection the
    pool made before it as stale, made anew when next lent, so a restart of Postgres fails one
    request, not one a pooled connection. Both as SQLAlchemy does on a disconnect in its own
    statements (``Connection._handle_dbapi_exception``: ``pool._invalidate``, then the
    connection's ``invalidate``).

    The connection is taken from the pool itself, not through SQLAlchemy's ``AsyncConnection``:
    that connection's making, start and close (three greenlet switches) and its isolation level
    set and reset cost 0.18 ms of CPU a lending, the pool's own checkout and checkin 0.07 (issue
    20: four lendings a ring in the dispatcher, one or more a request in call-log). The pool's
    pre-ping and its reset on return are the pool's, as before; autocommit (:func:`autocommit`'s
    engine) is set on psycopg's connection here and unset before it goes back, as SQLAlchemy's
    ``isolation_level`` sets and resets it."""
    pool = engine.sync_engine.pool
    lent = await greenlet_spawn(pool.connect)
    try:
        pg = lent.driver_connection
        assert isinstance(pg, psycopg.AsyncConnection)
        autocommitted = engine.get_execution_options().get("isolation_level") == "AUTOCOMMIT"
        if autocommitted:
            await pg.set_autocommit(True)
        try:
            yield pg
        finally:
            if pg.broken:  # lost, not closed by us: its siblings were most likely lost with it
                pool._invalidate(lent, _checkin=False)
            if pg.closed or pg.info.transaction_status != TransactionStatus.IDLE:
                await greenlet_spawn(lent.invalidate)  # closes it: the driver's close awaits
            elif autocommitted:
                await pg.set_autocommit(False)
    finally:
        await greenlet_spawn(lent.close)


@asynccontextmanager
async def driver_transaction(engine: AsyncEngine) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    """One transaction on psycopg's own connection (:func:`driver_connection`): ``BEGIN`` on
    entering, ``COMMIT`` when the block ends, ``ROLLBACK`` when it raises. For several statements
    that stand or fall together, or one that must die with its process rather than commit once a
    lock it waits on is let go."""
    async with driver_connection(engine) as pg, pg.transaction():
        yield pg


def driver_sql(statement: sa.ClauseElement) -> str:
    """``statement`` as the SQL psycopg runs (SQLAlchemy's psycopg dialect), with ``%(name)s``
    placeholders for its bound parameters. Compile once, at import: a module's constant."""
    return str(statement.compile(dialect=_PSYCOPG))


_PSYCOPG = psycopg_dialect.dialect()  # type: ignore[no-untyped-call,unused-ignore]


async def answers(engine: AsyncEngine, timeout_s: float = 2.0) -> bool:
    """Whether Postgres answers a query on ``engine`` within ``timeout_s`` seconds (readiness)."""
    try:
        async with asyncio.timeout(timeout_s), engine.connect() as conn:
            await conn.execute(sa.text("SELECT 1"))
    except (TimeoutError, sa.exc.SQLAlchemyError, OSError):
        return False
    return True


@asynccontextmanager
async def translate_errors(what: str) -> AsyncIterator[None]:
    """Turn a lost or refused database connection, or a database with no table for ``what``
    (never migrated, or not the platform's), into ``StoreUnavailable`` (503, retryable)."""
    try:
        yield
    except (
        sa.exc.OperationalError,
        sa.exc.InterfaceError,
        psycopg.OperationalError,
        psycopg.InterfaceError,
        OSError,
    ) as exc:
        said = str(getattr(exc, "orig", None) or exc).strip().splitlines()
        why = f" ({said[0].strip()})" if said else ""
        raise StoreUnavailable(f"{what}: the database did not answer{why}") from exc
    except (sa.exc.DataError, psycopg.DataError) as exc:
        raise unstorable(what, exc) from exc
    except (sa.exc.ProgrammingError, psycopg.ProgrammingError) as exc:
        orig = getattr(exc, "orig", exc)
        if getattr(orig, "sqlstate", None) not in UNMIGRATED:
            raise
        raise StoreUnavailable(
            f"{what}: the database has no table for it ({str(orig).splitlines()[0]}): it "
            "was never migrated (pinecall-runtime migrate), or it is not the platform's (is "
            "PINECALL_DATABASE_URL, or .state/up.json while up runs, the one meant?)"
        ) from exc


def unstorable(what: str, exc: sa.exc.DataError | psycopg.DataError) -> Unprocessable:
    """What Postgres refused to store as a value (a NUL character in a text or JSON string, a
    number out of range: its ``22`` class) as the caller's error, 422: never retryable, since
    sending it again unchanged can only fail again (a 5xx would hold a writer's retries)."""
    orig = getattr(exc, "orig", exc)
    return Unprocessable(f"{what}: Postgres cannot store it: {str(orig).splitlines()[0]}")


UNMIGRATED = {"42P01", "3F000"}
"""Postgres's ``undefined_table`` and ``invalid_schema_name``: what a database never migrated
answers."""


def migrate(url: str, script_location: Path, schema: str, revision: str = "head") -> None:
    """Run a service's alembic migrations up to ``revision`` (blocking; call it from a thread).

    The version table is ``<schema>.alembic_version``; the schema is made if missing.
    """
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(script_location))
    config.set_main_option("sqlalchemy.url", sqlalchemy_url(url).replace("%", "%%"))
    config.attributes["schema"] = schema
    command.upgrade(config, revision)


def migrate_installed(url: str) -> list[str]:
    """Every installed service's migrations on ``url`` (the ``pinecall_runtime.migrations``
    entry points, by name); returns the services migrated (blocking)."""
    from importlib.metadata import entry_points

    done = []
    for ep in sorted(entry_points(group="pinecall_runtime.migrations"), key=lambda e: e.name):
        ep.load()(url)
        done.append(ep.name)
    return done


def run_migration_env(target_metadata: sa.MetaData) -> None:
    """The body of every service's ``migrations/env.py``: online migrations on a sync engine."""
    from alembic import context

    config = context.config
    schema: str = config.attributes.get("schema") or str(target_metadata.schema)
    engine = sa.create_engine(
        str(config.get_main_option("sqlalchemy.url")), poolclass=sa.pool.NullPool
    )
    with engine.connect() as connection:
        connection.execute(sa.text(f'CREATE SCHEMA IF NOT EXISTS "{schema}"'))
        connection.commit()
        context.configure(
            connection=connection,
            target_metadata=target_metadata,
            version_table_schema=schema,
            include_schemas=True,
        )
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


def row_dict(row: sa.Row[Any]) -> dict[str, Any]:
    """A result row as a plain dict."""
    return dict(row._mapping)
