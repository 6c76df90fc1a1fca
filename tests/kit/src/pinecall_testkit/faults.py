"""A transport that loses requests and answers on command, for tests of the workers' writer
against real replicas (httpx's mock-transport habit: a transport, never a patch). Used only by
tests.

Each request takes the next fault from the script (``None`` once the script is done):

==========  ===========================================================================
fault       what the client sees
==========  ===========================================================================
``drop``    nothing answered: ``httpx.ConnectError``, the request never reached a replica
``lose``    the replica wrote and answered, the answer was lost: ``httpx.ReadError``
``503``     a 503 without reaching a replica
``502``     the replica wrote and answered, and a proxy answered 502 instead
==========  ===========================================================================

Requests go to the replicas in turn (``A, B, A, …``), so every retry lands on another replica.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal, cast

import httpx
import psycopg
import stamina
from litestar import Litestar

Fault = Literal["drop", "lose", "503", "502"]


class FaultyTransport(httpx.AsyncBaseTransport):
    """Round-robin over ``apps`` (in-process replicas), with the faults of ``script``."""

    def __init__(self, apps: list[Litestar], script: Iterable[Fault | None] = ()) -> None:
        self.replicas = [httpx.ASGITransport(app=cast(Any, app)) for app in apps]
        self.script = list(script)
        self.sent: list[tuple[str, str, Fault | None]] = []
        """Every request: (method, path, fault)."""
        self._turn = 0

    def then(self, *faults: Fault | None) -> None:
        """Add faults to the script."""
        self.script.extend(faults)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        fault = self.script.pop(0) if self.script else None
        self.sent.append((request.method, request.url.path, fault))
        if fault == "drop":
            raise httpx.ConnectError("dropped by the test", request=request)
        if fault == "503":
            return httpx.Response(503, json={"title": "test", "status": 503}, request=request)
        replica = self.replicas[self._turn % len(self.replicas)]
        self._turn += 1
        response = await replica.handle_async_request(request)
        await response.aread()
        if fault == "lose":
            raise httpx.ReadError("answer lost by the test", request=request)
        if fault == "502":
            return httpx.Response(502, json={"title": "test", "status": 502}, request=request)
        return response


async def a_batch_waits_on_a_lock(database_url: str, holder: psycopg.AsyncConnection[Any]) -> None:
    """Return once some backend of the database waits on a lock ``holder`` holds (a batch caught
    mid-transaction on the row ``holder`` locked). Only ``holder``'s: a call-log replica's own
    loops take row locks too, and a wait of theirs taken for the batch's let a test restart
    Postgres before the batch reached it (CI, once)."""
    blocker = holder.info.backend_pid
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as probe:
        async for attempt in stamina.retry_context(
            on=AssertionError, attempts=None, timeout=20, wait_initial=0.02, wait_max=0.1
        ):
            with attempt:  # no event says "a backend waits on this lock": ask Postgres
                cursor = await probe.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))",
                    (blocker,),
                )
                row = await cursor.fetchone()
                assert row is not None
                assert row[0] >= 1
