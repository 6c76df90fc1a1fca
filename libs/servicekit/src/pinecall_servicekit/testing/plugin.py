"""Real Postgres and NATS for each test, isolated (``shared/CONVENTIONS.md`` habit 12).

- ``platform_endpoints`` (session): the running Postgres and NATS named by ``PINECALL_DATABASE_URL``
  and ``PINECALL_NATS_URL`` (or their defaults), or embedded ones started for the session.
- ``database_url``: a database of the test's own, copied from a template on which every installed
  service's migrations ran once (entry points ``pinecall_runtime.migrations``); dropped after.
- ``socket_database_url``: that database through the server's Unix socket (skips where it has
  none on this machine), the URL form the embedded Postgres hands out.
- ``nats_namespace``: a subject namespace, stream and bucket prefix of the test's own.
- ``module_database_url``, ``module_nats_namespace``: the same, shared by a module's tests (for a
  module that serves one process to all its tests, each test in a scope of its own, e.g. an org;
  its async fixtures and tests run in the module's event loop, ``loop_scope="module"``).
- ``nats_url``: where NATS answers.

With pytest-timeout installed, a test past its timeout prints its asyncio tasks first
(:mod:`.hung`). Each test file's garbage is collected as it ends (:mod:`.leaks`).
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from urllib.parse import quote, urlencode

import nats
import nats.js.errors
import psycopg
import pytest
import pytest_asyncio

from pinecall_contracts.subjects import Subjects
from pinecall_servicekit.db import migrate_installed
from pinecall_servicekit.dburl import conninfo, is_socket_folder, where
from pinecall_servicekit.dburl import with_database as with_database
from pinecall_servicekit.platform import Endpoints, ensure_platform
from pinecall_servicekit.settings import Settings


def pytest_configure(config: pytest.Config) -> None:
    from pinecall_servicekit.testing import leaks

    config.pluginmanager.register(leaks, "pinecall-leaks")
    if config.pluginmanager.has_plugin("timeout"):
        from pinecall_servicekit.testing import hung

        config.pluginmanager.register(hung, "pinecall-hung")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Modules marked ``long`` (a minute or more of processes) first, each kept whole, the rest
    in their order: ``./dev test`` runs two pytest-xdist processes a file at a time, and a long
    file handed out last would leave one process alone at the end."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None)


run_all_migrations = migrate_installed
"""Every installed service's migrations on ``url`` (``pinecall_servicekit.db``)."""


@pytest.fixture(scope="session")
def platform_endpoints() -> Iterator[Endpoints]:
    base = Settings.from_env()
    with ensure_platform(base.database_url, base.nats_url) as endpoints:
        yield endpoints


@contextlib.contextmanager
def own_database(admin: str, prefix: str, template: str | None = None) -> Iterator[str]:
    """A database of its own on the server of ``admin`` (a libpq URL), named ``<prefix>_<hex>``
    and copied from ``template`` when given, else empty (no migration ran on it); yields its
    URL and drops it after, connections and all."""
    name = f"{prefix}_{secrets.token_hex(5)}"
    copied = f' TEMPLATE "{template}"' if template else ""
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"{copied}')
    try:
        yield with_database(admin, name)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def template_database(platform_endpoints: Endpoints) -> Iterator[str]:
    """The name of a database with every migration applied, copied by each test."""
    with own_database(platform_endpoints.database_url, "pc_tpl") as url:
        run_all_migrations(url)
        yield where(url).database


@pytest.fixture
def database_url(platform_endpoints: Endpoints, template_database: str) -> Iterator[str]:
    """A migrated database of this test's own (libpq URL)."""
    with own_database(platform_endpoints.database_url, "pc_t", template_database) as url:
        yield url


@pytest.fixture(scope="module")
def module_database_url(platform_endpoints: Endpoints, template_database: str) -> Iterator[str]:
    """A migrated database the module's tests share (libpq URL)."""
    with own_database(platform_endpoints.database_url, "pc_mod", template_database) as url:
        yield url


@pytest.fixture
def empty_database_url(platform_endpoints: Endpoints) -> Iterator[str]:
    """A database of this test's own that no migration ran on (libpq URL)."""
    with own_database(platform_endpoints.database_url, "pc_m") as url:
        yield url


@pytest.fixture
def socket_database_url(database_url: str) -> str:
    """The test's own database (:func:`database_url`) reached through the server's Unix socket
    (``postgresql://user@/db?host=/var/run/postgresql``, the form the embedded Postgres hands
    out); skips where the server has no socket on this machine (a Postgres elsewhere)."""
    if any(is_socket_folder(host or "/") for host, _ in where(database_url).endpoints):
        return database_url  # it already is one (the embedded Postgres)
    with psycopg.connect(database_url) as conn:
        row = conn.execute(
            "SELECT current_setting('unix_socket_directories'), current_setting('port')"
        ).fetchone()
    assert row is not None
    folders, port = str(row[0]), str(row[1])
    for folder in (f.strip() for f in folders.split(",")):
        if folder.startswith("/") and (Path(folder) / f".s.PGSQL.{port}").is_socket():
            info = conninfo(database_url)
            user = quote(info.get("user", "postgres"), safe="")
            password = f":{quote(info['password'], safe='')}" if info.get("password") else ""
            query = urlencode({"host": folder, "port": port}, safe="/")
            return f"postgresql://{user}{password}@/{quote(info['dbname'], safe='')}?{query}"
    pytest.skip(f"the Postgres at {where(database_url)} has no Unix socket on this machine")


@pytest.fixture
def nats_url(platform_endpoints: Endpoints) -> str:
    return platform_endpoints.nats_url


@pytest.fixture
async def nats_namespace(nats_url: str) -> AsyncIterator[str]:
    """A namespace no other test uses: its subjects, streams and buckets are its own, and its
    streams and buckets are deleted after the test."""
    async with _own_namespace(nats_url) as namespace:
        yield namespace


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def module_nats_namespace(platform_endpoints: Endpoints) -> AsyncIterator[str]:
    """A namespace the module's tests share, deleted after the module."""
    async with _own_namespace(platform_endpoints.nats_url) as namespace:
        yield namespace


@contextlib.asynccontextmanager
async def _own_namespace(nats_url: str) -> AsyncIterator[str]:
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
