"""Test support for the roster and for tests of other services that need one (no fixtures here:
they are in the tests' conftest). Used only by tests."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager

from pinecall_servicekit.testing.apps import Replica
from pinecall_testkit.common import Keys as Keys
from pinecall_testkit.common import bearer as bearer
from pinecall_testkit.common import make_keys as make_keys
from pinecall_testkit.common import replica_of, running_at

URL = "http://roster.test"
"""Where a replica in the test's loop is reached."""

running = running_at(URL)
"""``running(app)``: the app's lifespan run in this event loop, reached over ASGI at :data:`URL`."""


def heartbeat(
    host: str = "worker-a",
    *,
    fleet: str = "pinecall",
    start: int = 1791067258,
    active: int = 0,
    seats: int = 8,
    **extra: object,
) -> dict[str, object]:
    name = f"{fleet}/{host}.{start}"
    body: dict[str, object] = {
        "fleet": fleet,
        "worker": name,
        "agent_name": name,
        "active": active,
        "max_jobs": seats,
        "load": active / seats,
        "draining": False,
    }
    return body | extra


def replica_on(
    database_url: str, nats_url: str, nats_namespace: str, **overrides: object
) -> AbstractAsyncContextManager[Replica]:
    """A roster replica on the test's database and NATS (``overrides``: its other settings),
    in this event loop, for another service's tests."""
    from pinecall_roster.app import create_app
    from pinecall_roster.settings import RosterSettings

    return replica_of(
        create_app, RosterSettings, URL, database_url, nats_url, nats_namespace, **overrides
    )
