"""Real Postgres and NATS for each test, isolated (``shared/CONVENTIONS.md`` habit 12).

- ``platform_endpoints`` (session): the running Postgres and NATS named by ``PINECALL_DATABASE_URL``
  and ``PINECALL_NATS_URL`` (or their defaults), or embedded ones started for the session.
- ``database_url``: a database of the test's own, copied from a template on which every installed
  service's migrations ran once (entry points ``pinecall_runtime.migrations``); dropped after.
- ``nats_namespace``: a subject namespace, stream and bucket prefix of the test's own.
- ``nats_url``: where NATS answers.

With pytest-timeout installed, a test past its timeout prints its asyncio tasks first
(:mod:`.hung`).
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import AsyncIterator, Iterator

import nats
import nats.js.errors
import psycopg
import pytest
from sqlalchemy.engine import make_url

from pinecall_contracts.subjects import Subjects
from pinecall_servicekit.db import migrate_installed
from pinecall_servicekit.platform import Endpoints, ensure_platform
from pinecall_servicekit.settings import Settings


def pytest_configure(config: pytest.Config) -> None:
    if config.pluginmanager.has_plugin("timeout"):
        from pinecall_servicekit.testing import hung

        config.pluginmanager.register(hung, "pinecall-hung")


def with_database(url: str, name: str) -> str:
    """``url`` pointing at database ``name``."""
    return make_url(url).set(database=name).render_as_string(hide_password=False)


run_all_migrations = migrate_installed
"""Every installed service's migrations on ``url`` (``pinecall_servicekit.db``)."""


@pytest.fixture(scope="session")
def platform_endpoints() -> Iterator[Endpoints]:
    base = Settings.from_env()
    with ensure_platform(base.database_url, base.nats_url) as endpoints:
        yield endpoints


@pytest.fixture(scope="session")
def template_database(platform_endpoints: Endpoints) -> Iterator[str]:
    """The name of a database with every migration applied, copied by each test."""
    admin = platform_endpoints.database_url
    name = f"pc_tpl_{secrets.token_hex(4)}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        run_all_migrations(with_database(admin, name))
        yield name
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def database_url(platform_endpoints: Endpoints, template_database: str) -> Iterator[str]:
    """A migrated database of this test's own (libpq URL)."""
    admin = platform_endpoints.database_url
    name = f"pc_t_{secrets.token_hex(5)}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template_database}"')
    try:
        yield with_database(admin, name)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def nats_url(platform_endpoints: Endpoints) -> str:
    return platform_endpoints.nats_url


@pytest.fixture
async def nats_namespace(nats_url: str) -> AsyncIterator[str]:
    """A namespace no other test uses: its subjects, streams and buckets are its own, and its
    streams and buckets are deleted after the test."""
    namespace = f"t{secrets.token_hex(6)}"
    yield namespace
    client = await nats.connect(nats_url, connect_timeout=2, max_reconnect_attempts=1)
    try:
        js = client.jetstream()
        for name in Subjects(namespace).streams():
            with contextlib.suppress(nats.js.errors.NotFoundError):
                await js.delete_stream(name)
    finally:
        await client.close()
