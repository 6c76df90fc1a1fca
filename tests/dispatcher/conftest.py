"""The dispatcher in its chain, on real Postgres and NATS, the LiveKit stand-in and real workers.

``chain`` runs the roster, webhook-ingest and the dispatcher in the test's loop
(``pinecall_loadlab.scenarios.chain``); the stand-in's webhooks reach webhook-ingest, and workers
are unmodified ``Worker``s on the THREAD executor. The dispatcher's numbers are shortened
(``SHORT``): the same rules, in seconds a test can wait. ``call_log`` is a call-log replica, for
the tests that need one (``fleet.full``, ``call.opened``).

They are cross-service tests, so they live here and not in services/dispatcher/tests (which
keeps the dispatcher's own, the pure rules): the chain is the roster, webhook-ingest and the
call-log beside the dispatcher, and a service's tests import no other service
(build-support/macros.py).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from pinecall_call_log.app import create_app as call_log_app
from pinecall_call_log.settings import CallLogSettings
from pinecall_loadlab.livekit.testing import *  # noqa: F403  (the stand-in's fixtures)
from pinecall_loadlab.scenarios.testing import *  # noqa: F403  (the chain's fixtures)
from pinecall_servicekit.testing.apps import Replica, running

SHORT: dict[str, Any] = {"reoffer_s": 4.0, "fleet_wait_s": 4.0, "sweep_s": 0.5}
"""The stand-in's offer deadline is 3 s in tests: a re-offer after 4 s comes after LiveKit gave up
on the first offer, as 12 s comes after its 10 s."""


@pytest.fixture
def dispatcher_numbers() -> dict[str, Any]:
    """The dispatcher's settings of a test (override in a module)."""
    return SHORT


@pytest.fixture
async def call_log(database_url: str, nats_url: str, nats_namespace: str) -> AsyncIterator[Replica]:
    settings = CallLogSettings.from_env(
        {}, database_url=database_url, nats_url=nats_url, nats_namespace=nats_namespace
    )
    async with running(call_log_app(settings), "http://call-log.lab") as client:
        yield client
