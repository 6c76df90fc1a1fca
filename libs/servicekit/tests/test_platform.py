"""A fresh machine: with no Postgres and no NATS answering, embedded ones are started and stopped.

This is the path ``./dev up`` and ``./dev test`` take where nothing runs; CI's machine runs both,
so this test is what keeps the embedded path working there too.
"""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from pinecall_servicekit.platform import ensure_platform, free_port, port_answers


def test_embedded_postgres_and_nats_start_answer_and_stop() -> None:
    nowhere_db = f"postgresql://postgres@127.0.0.1:{free_port()}/test"
    nowhere_nats = f"nats://127.0.0.1:{free_port()}"
    with ensure_platform(nowhere_db, nowhere_nats) as platform:
        assert platform.embedded_postgres
        assert platform.embedded_nats
        with psycopg.connect(platform.database_url) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
        assert port_answers(platform.nats_url, 4222)
    assert not port_answers(platform.nats_url, 4222)


def test_a_postgres_that_refuses_is_an_error_not_an_embedded_one(
    platform_endpoints,  # type: ignore[no-untyped-def]
    socket_database_url: str,
) -> None:
    import pytest

    from pinecall_servicekit.dburl import with_database
    from pinecall_servicekit.platform import PlatformError

    # over TCP and over the server's Unix socket alike
    for url in (platform_endpoints.database_url, socket_database_url):
        wrong = with_database(url, "no_such_database_here")
        with (
            pytest.raises(PlatformError, match="refuses"),
            ensure_platform(wrong, platform_endpoints.nats_url),
        ):
            pass


def test_free_ports_are_never_handed_twice_and_lie_below_the_ephemeral_range() -> None:
    """``up`` once handed its vendor fakes and webhook-ingest the same port (both from
    ``bind(0)``, one released before the other was picked): the second died ``Address already
    in use``. Ports below the kernel's ephemeral range are not taken by ``bind(0)`` or by an
    outgoing connection in the time between the pick and the bind."""
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    ports = [free_port() for _ in range(500)]
    assert len(set(ports)) == len(ports)
    assert all(10_000 <= p < low for p in ports)


def test_xdist_workers_take_disjoint_shares_of_the_ports(monkeypatch: pytest.MonkeyPatch) -> None:
    # two processes of one suite pick ports at random: with shares, never the same one
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "3")
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw2")
    ports = [free_port() for _ in range(50)]
    assert {port % 3 for port in ports} == {2}
    assert len(set(ports)) == 50
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
    assert {free_port() % 3 for _ in range(50)} == {0}
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "not-a-worker")  # outside xdist: the whole range
    assert len({free_port() % 3 for _ in range(200)}) == 3
