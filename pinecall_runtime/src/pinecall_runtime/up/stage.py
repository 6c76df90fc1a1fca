"""The run's own platform: a database and a NATS namespace of its own on the Postgres and NATS
``up`` found (or started), every service's migrations, the keys, and each environment's LiveKit
keys; removed when the run ends, so two ``up``s on one machine never meet and a run leaves
nothing behind but its logs.

Keys made (``keys create``, the roster's verb): an operator key (the CLI's, the dispatcher's and
the reaper's), and per environment a fleet key (its worker and overflow) and an app key (its web
visitors' tokens and a page's call backs). Each environment's LiveKit (a stand-in) gets an API
key and a random secret of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import nats
import psycopg

from pinecall_contracts.subjects import Subjects
from pinecall_runtime.processes import run_cli
from pinecall_servicekit.dburl import with_database
from pinecall_servicekit.natsauth import NatsUser, fleet_user, service_user
from pinecall_servicekit.platform import Endpoints

ENVIRONMENTS: dict[str, str] = {"production": "pinecall", "sandbox": "pinecall-sandbox"}
"""Each environment and its fleet (the roster's default fleets rows)."""


@dataclass(kw_only=True)
class Run:
    """Where the run stores and talks, its keys (once :meth:`prepare` made them), its folders."""

    token: str
    """The run's name: its database is ``pcup_<token>``, its namespace ``up<token>``."""
    database_url: str
    nats_url: str
    namespace: str
    logs: Path
    """Every process's log: ``<state dir>/logs/<name>.log``."""
    sockets: Path
    """A short folder for the workers' measures sockets (a Unix socket's path is ≤ 107 bytes)."""
    livekit_keys: dict[str, tuple[str, str]]
    """Environment → its LiveKit's API key and secret."""
    operator_key: str = ""
    """The operator's: the CLI's, and ``up``'s own reads for its table and report."""
    service_key: str = ""
    """The services': what the dispatcher and the reaper read and post of the others with."""
    fleet_keys: dict[str, str] = field(default_factory=dict)
    """Environment → its fleet key."""
    app_keys: dict[str, str] = field(default_factory=dict)
    """Environment → its app key."""
    traces_file: str | None = None
    """Where every process appends its spans (``up --traces``, ``PINECALL_TRACES_FILE``)."""

    def env(self) -> dict[str, str]:
        """The environment every process of the run starts from: this one without its
        ``PINECALL_*`` (an unknown one stops a service), then the run's platform."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("PINECALL_")}
        traces = {"PINECALL_TRACES_FILE": self.traces_file} if self.traces_file else {}
        return (
            env
            | {
                "PINECALL_DATABASE_URL": self.database_url,
                "PINECALL_NATS_URL": self.nats_url,
                "PINECALL_NATS_NAMESPACE": self.namespace,
                "PINECALL_LOG_FORMAT": "text",
            }
            | traces
        )

    def livekit_keys_setting(self) -> str:
        """``PINECALL_LIVEKIT_KEYS``: ``production=KEY:SECRET,sandbox=KEY:SECRET``."""
        return ",".join(f"{e}={k}:{s}" for e, (k, s) in self.livekit_keys.items())

    def prepare(self) -> None:
        """Every service's migrations on the run's database (``migrate``), then its keys
        (``keys create``, one CLI process each, made at once). Raises
        :class:`~pinecall_runtime.processes.StepFailed` (what it printed) when one fails."""
        env = self.env()
        run_cli("migrate", env=env)
        asked = {"operator": ("--kind", "operator"), "service": ("--kind", "service")} | {
            f"{kind}-{e}": ("--kind", kind, "--environment", e)
            for kind in ("fleet", "app")
            for e in ENVIRONMENTS
        }
        with ThreadPoolExecutor(len(asked)) as pool:
            made = {
                name: pool.submit(run_cli, "keys", "create", "--name", "up", *args, env=env)
                for name, args in asked.items()
            }
            keys = {name: future.result() for name, future in made.items()}
        self.operator_key = keys["operator"]
        self.service_key = keys["service"]
        self.fleet_keys = {e: keys[f"fleet-{e}"] for e in ENVIRONMENTS}
        self.app_keys = {e: keys[f"app-{e}"] for e in ENVIRONMENTS}


def nats_users(token: str) -> list[NatsUser]:
    """The NATS users of run ``token`` (namespace ``up<token>``), for a NATS ``up`` starts
    itself: first the one every process of the run (and the CLI, through ``up.json``) connects
    as, then each environment's fleet's, allowed only its own heartbeats (:mod:`.natsauth`)."""
    namespace = f"up{token}"
    return [
        service_user("services", namespace),
        *(fleet_user(fleet, namespace) for fleet in ENVIRONMENTS.values()),
    ]


@contextlib.contextmanager
def own_platform(
    platform: Endpoints, state_dir: Path, token: str | None = None,
    users: list[NatsUser] | None = None,
) -> Iterator[Run]:  # fmt: skip
    """A database and namespace of the run's own (empty: :meth:`Run.prepare` migrates it and
    makes the keys); dropped and deleted when the context ends. The logs under
    ``state_dir/logs`` stay until the next run. ``token``: the run's name (random if None);
    ``users``: :func:`nats_users` of it, the first one's the run's NATS URL when the platform's
    NATS has authorization on. Raises ``psycopg.Error`` when the database could not be
    created."""
    token = token or secrets.token_hex(4)
    nats_url = platform.nats_url
    if platform.nats_authorization and users:
        nats_url = users[0].url(platform.nats_url)
    admin = platform.database_url
    database = f"pcup_{token}"
    logs = state_dir / "logs"
    shutil.rmtree(logs, ignore_errors=True)
    logs.mkdir(parents=True)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{database}"')
    sockets = Path(tempfile.mkdtemp(prefix="pcup-"))
    namespace = f"up{token}"
    try:
        yield Run(
            token=token,
            database_url=with_database(admin, database),
            nats_url=nats_url,
            namespace=namespace,
            logs=logs,
            sockets=sockets,
            livekit_keys={e: (f"up-{e}", secrets.token_urlsafe(32)) for e in ENVIRONMENTS},
        )
    finally:
        shutil.rmtree(sockets, ignore_errors=True)
        asyncio.run(_delete_streams(nats_url, namespace))
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


async def _delete_streams(nats_url: str, namespace: str) -> None:
    """The namespace's JetStream streams, its KV buckets' included (best effort: a leftover is
    only litter)."""
    try:
        client = await nats.connect(nats_url, connect_timeout=2, max_reconnect_attempts=1)
    except Exception:  # nats-py raises a handful of unrelated types here
        return
    try:
        js = client.jetstream()
        for stream in Subjects(namespace).streams():
            with contextlib.suppress(Exception):  # a stream never made: nothing to remove
                await js.delete_stream(stream)
    finally:
        await client.close()
