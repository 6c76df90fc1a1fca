"""The platform of one ``lab run``: Postgres and NATS, a database and a namespace of its own.

The running Postgres and NATS (``PINECALL_DATABASE_URL``, ``PINECALL_NATS_URL``) or embedded ones
(``ensure_platform``); a database ``pclab_<hex>`` with every installed service's migrations, an
operator key and a fleet key per environment in it, a NATS namespace ``lab<hex>``; the LiveKit
stand-in on a free port. Everything made is removed when the run ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator

import nats
import psycopg

from pinecall_contracts.subjects import Subjects
from pinecall_loadlab.livekit import StandIn, StandInConfig
from pinecall_loadlab.scenarios.chain import ChainConfig
from pinecall_roster.store import Store as RosterStore
from pinecall_servicekit import db
from pinecall_servicekit.dburl import with_database
from pinecall_servicekit.platform import ensure_platform
from pinecall_servicekit.settings import Settings

LAB_KEY, LAB_SECRET = "lab-key", "lab-secret-of-at-least-32-characters"


async def _keys(url: str) -> tuple[str, str, dict[str, str]]:
    """An operator key, a service key (the dispatcher's) and a fleet key per environment."""
    engine = db.create_engine(url, pool_size=1)
    store = RosterStore(engine)
    try:
        operator = await store.create_key("operator", "lab", None)
        service = await store.create_key("service", "lab", None)
        fleet = {
            env: (await store.create_key("fleet", "lab", env)).secret
            for env in ("production", "sandbox")
        }
    finally:
        await engine.dispose()
    return operator.secret, service.secret, fleet


async def _delete_streams(nats_url: str, namespace: str) -> None:
    client = await nats.connect(nats_url, connect_timeout=2, max_reconnect_attempts=1)
    try:
        js = client.jetstream()
        for name in Subjects(namespace).streams():
            with contextlib.suppress(Exception):  # a stream never made: nothing to remove
                await js.delete_stream(name)
    finally:
        await client.close()


@contextlib.asynccontextmanager
async def lab_platform(
    *, offer_deadline_s: float, connection_timeout_s: float = 5.0
) -> AsyncIterator[tuple[StandIn, ChainConfig]]:
    """The stand-in (LiveKit's offer deadline and connection timeout as given) and the chain's
    config on a platform of the run's own."""
    base = Settings.from_env()
    token = secrets.token_hex(4)
    with ensure_platform(base.database_url, base.nats_url) as platform:
        admin = platform.database_url
        name = f"pclab_{token}"
        url = with_database(admin, name)
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        namespace = f"lab{token}"
        try:
            await asyncio.to_thread(db.migrate_installed, url)
            operator, service, fleet = await _keys(url)
            config = StandInConfig(
                keys={LAB_KEY: LAB_SECRET},
                port=0,
                offer_deadline_s=offer_deadline_s,
                connection_timeout_s=connection_timeout_s,
                seed=7,
            )
            async with StandIn(config) as lk:
                yield (
                    lk,
                    ChainConfig(
                        database_url=url,
                        nats_url=platform.nats_url,
                        namespace=namespace,
                        operator_key=operator,
                        service_key=service,
                        fleet_keys=fleet,
                        api_key=LAB_KEY,
                        api_secret=LAB_SECRET,
                    ),
                )
        finally:
            await _delete_streams(platform.nats_url, namespace)
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
