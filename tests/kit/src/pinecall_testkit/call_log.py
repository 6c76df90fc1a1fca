"""Test support for the call log and for tests of other services that need one (no fixtures
here: they are in the tests' conftest). Used only by tests."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, cast

import httpx
import msgspec
import psycopg
import stamina

from pinecall_contracts.calls import CallOpen
from pinecall_servicekit.testing.apps import Replica
from pinecall_testkit.common import Keys as Keys
from pinecall_testkit.common import bearer as bearer
from pinecall_testkit.common import make_keys as make_keys
from pinecall_testkit.common import replica_of, running_at

URL = "http://call-log.test"
"""Where a replica in the test's loop is reached."""

running = running_at(URL)
"""``running(app)``: the app's lifespan run in this event loop, reached over ASGI at :data:`URL`."""

TS = "2026-11-30T06:49:19+00:00"


def opening(call: str = "call_1", **extra: object) -> dict[str, object]:
    """A ``POST /v1/calls`` body."""
    body: dict[str, object] = {
        "call": call,
        "agent": "support-bot",
        "org": "org_acme",
        "environment": "production",
        "room": f"room-{call}",
        "worker": "pinecall/worker-a.1791067258",
        "context": {"caller": "+15550100"},
        "config": {"voice": "alloy"},
        "prompt_hash": "sha256:5b1c0e",
    }
    return body | extra


def call_open(call: str = "call_1", **extra: object) -> CallOpen:
    """:func:`opening` as the ``CallOpen`` a client sends."""
    return msgspec.convert(opening(call, **extra), CallOpen)


def entry(n: int, kind: str = "transcript.user", ts: str = TS) -> dict[str, Any]:
    """The writer's ``n``-th entry (its data says ``n``, so the log can be checked against it)."""
    return {"kind": kind, "ts": ts, "data": {"n": n}}


def batch(after: int, size: int) -> dict[str, Any]:
    """The writer's entries ``after ..< after + size`` as one batch."""
    return {"after": after, "entries": [entry(n) for n in range(after, after + size)]}


def later(seconds: float) -> str:
    return (dt.datetime.now(dt.UTC) + dt.timedelta(seconds=seconds)).isoformat()


def replica_on(
    database_url: str, nats_url: str, nats_namespace: str, **overrides: object
) -> AbstractAsyncContextManager[Replica]:
    """A call-log replica on the test's database and NATS (``overrides``: its other settings),
    in this event loop, for another service's tests."""
    from pinecall_call_log.app import create_app
    from pinecall_call_log.settings import CallLogSettings

    return replica_of(
        create_app, CallLogSettings, URL, database_url, nats_url, nats_namespace, **overrides
    )


def replica_env(database_url: str, nats_url: str, nats_namespace: str) -> dict[str, str]:
    """The environment of a replica process (:func:`served`) on a test's database and NATS."""
    return {
        "PINECALL_DATABASE_URL": database_url,
        "PINECALL_NATS_URL": nats_url,
        "PINECALL_NATS_NAMESPACE": nats_namespace,
        "PINECALL_LOG_FORMAT": "text",
        "PINECALL_DB_POOL_SIZE": "2",
        "PINECALL_LOG_TOKEN_SECRET": "a secret every replica shares",
    }


class Process(msgspec.Struct, kw_only=True):
    """A replica served by Granian in processes of its own (``call-log serve``): its main
    process and workers form one process group, so :meth:`kill` takes them all."""

    url: str
    proc: Any

    def kill(self) -> None:
        """SIGKILL the replica's process group: nothing of it runs on, nothing is cleaned up."""
        import os
        import signal

        os.killpg(self.proc.pid, signal.SIGKILL)


@asynccontextmanager
async def served(
    env: dict[str, str],
    count: int = 2,
    *,
    ports: list[int] | None = None,
    service: str = "call-log",
) -> AsyncIterator[list[Process]]:
    """``count`` replicas of ``service`` (``pinecall-runtime <service> serve``) as real
    processes, started together (on ``ports`` when given: a replica started again where a killed
    one listened); each is stopped (SIGTERM, then SIGKILL) when the test ends. Ready means ``/readyz`` answers 200: a server gives no other sign that it
    listens."""
    import os
    import signal
    import sys

    import stamina

    from pinecall_servicekit.platform import free_port

    base = {k: v for k, v in os.environ.items() if not k.startswith("PINECALL_")} | env
    replicas = []
    for i in range(count):
        port = ports[i] if ports else free_port()
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "pinecall_runtime",
            service,
            "serve",
            env=base | {"PINECALL_PORT": str(port), "PINECALL_LOG_LEVEL": "WARNING"},
            start_new_session=True,
        )
        replicas.append(Process(url=f"http://127.0.0.1:{port}", proc=proc))
    try:
        async with httpx.AsyncClient() as http:
            for replica in replicas:
                async for attempt in stamina.retry_context(
                    on=httpx.HTTPError, attempts=None, timeout=60, wait_initial=0.1, wait_max=0.3
                ).with_name(f"waiting for a {service} replica to start: GET", (replica.url,), {}):
                    with attempt:
                        assert replica.proc.returncode is None, "the replica exited"
                        (await http.get(f"{replica.url}/readyz", timeout=1)).raise_for_status()
        yield replicas
    finally:
        for replica in replicas:
            if replica.proc.returncode is None:
                os.killpg(replica.proc.pid, signal.SIGTERM)
        for replica in replicas:
            try:
                async with asyncio.timeout(30):
                    await replica.proc.wait()
            except TimeoutError:
                replica.kill()
                await replica.proc.wait()


@asynccontextmanager
async def one_served(
    database_url: str, nats_url: str, nats_namespace: str
) -> AsyncIterator[Process]:
    """One replica as a real process on the test's database and NATS (what another service's
    tests reach over HTTP, from threads or processes of their own)."""
    env = {
        "PINECALL_DATABASE_URL": database_url,
        "PINECALL_NATS_URL": nats_url,
        "PINECALL_NATS_NAMESPACE": nats_namespace,
        "PINECALL_LOG_FORMAT": "text",
        "PINECALL_DB_POOL_SIZE": "2",
    }
    async with served(env, count=1) as [replica]:
        yield replica


class Listening(msgspec.Struct, kw_only=True):
    """An in-process replica also served on a real port (what a WebSocket client dials)."""

    client: Any
    """The replica's :class:`Replica` (HTTP over ASGI, the app at ``.app``)."""
    url: str
    """``ws://127.0.0.1:<port>``."""


@asynccontextmanager
async def listening(app: Any) -> AsyncIterator[Listening]:
    """Run ``app`` in this event loop (its lifespan as :data:`running` runs it) and serve it
    on a free loopback port with Granian's embedded server, in this loop too, so a test dials
    its app socket with a real WebSocket client and still awaits the app's own notices."""
    from granian.constants import Interfaces
    from granian.server.embed import Server

    from pinecall_servicekit.platform import free_port

    async with running(app) as client:
        port = free_port()
        server = Server(app, address="127.0.0.1", port=port, interface=Interfaces.ASGINL)
        serving = asyncio.create_task(server.serve(), name="granian-embedded")
        try:
            await _accepting(port, serving)
            yield Listening(client=client, url=f"ws://127.0.0.1:{port}")
        finally:
            cast(Any, server).stop()  # granian leaves it unannotated
            await serving


async def _accepting(port: int, serving: asyncio.Task[None]) -> None:
    """Return once the embedded server accepts on ``port`` (it gives no other sign)."""
    import stamina

    async for attempt in stamina.retry_context(
        on=OSError, attempts=None, timeout=30, wait_initial=0.01, wait_max=0.1
    ).with_name("waiting for the embedded server to listen on", (port,), {}):
        with attempt:
            assert not serving.done(), "the embedded server stopped"
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            await writer.wait_closed()


async def lock_waited_on(database_url: str) -> None:
    """Returns once a session in the test's database waits on a lock (a row's, or another's
    insert of the same key): no event says so, so Postgres is asked."""
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        async for attempt in stamina.retry_context(
            on=AssertionError, attempts=None, timeout=20, wait_initial=0.02, wait_max=0.1
        ):
            with attempt:
                row = await (
                    await conn.execute(
                        "SELECT count(*) FROM pg_stat_activity"
                        " WHERE datname = current_database() AND wait_event_type = 'Lock'"
                    )
                ).fetchone()
                assert row is not None
                assert row[0] >= 1
