"""Database URLs of every form the platform and its operators use: another database's URL keeps
the server (a socket folder included), and libpq reads it back as meant."""

from __future__ import annotations

import psycopg
import pytest

from pinecall_servicekit.dburl import conninfo, describe, libpq_url, where, with_database
from pinecall_servicekit.platform import ensure_platform, free_port, postgres_listens


@pytest.mark.parametrize(
    ("url", "server"),
    [
        ("postgresql://postgres@127.0.0.1:5432/test", "127.0.0.1:5432"),
        ("postgresql+psycopg://u:p%40ss@db.example/test", "db.example:5432"),
        # the embedded Postgres's own form, and as SQLAlchemy renders it
        ("postgresql://postgres:@/postgres?host=/tmp/pg-x", "socket /tmp/pg-x (port 5432)"),
        ("postgresql+psycopg://postgres:@/p?host=%2Ftmp%2Fpg-x&port=6", "socket /tmp/pg-x (port 6)"),
        ("postgresql://postgres@%2Fvar%2Frun%2Fpostgresql/test", "socket /var/run/postgresql (port 5432)"),
        ("postgresql:///test?host=127.0.0.1&port=1", "127.0.0.1:1"),
        ("postgresql://h1:5432,h2:5433/test?sslmode=require&dbname=old", "h1:5432,h2:5433"),
        ("postgresql://x@[::1]:5/d", "[::1]:5"),
    ],
)  # fmt: skip
def test_another_database_keeps_the_server_and_only_the_name_changes(url: str, server: str) -> None:
    other = with_database(url, "pc_t abc")
    assert where(other).database == "pc_t abc"
    assert where(other).server == server
    assert str(where(other)) == f"database pc_t abc on {server}"
    before, after = conninfo(url), conninfo(other)
    assert {k: v for k, v in after.items() if k != "dbname"} == {
        k: v for k, v in before.items() if k != "dbname"
    }
    assert other.split("://", 1)[0] == url.split("://", 1)[0]  # the driver stays where written


def test_a_url_libpq_cannot_read_is_described_not_raised() -> None:
    with pytest.raises(ValueError, match="libpq"):
        where("postgresql://h/d?no_such_option=1")
    assert describe("postgresql://h/d?no_such_option=1").startswith("an unreadable database URL")
    assert "p@ss" not in describe("postgresql://u:p%40ss@h/d")


def test_libpq_url_drops_only_the_driver() -> None:
    assert libpq_url("postgresql+psycopg://u@h/d?host=/x") == "postgresql://u@h/d?host=/x"
    assert libpq_url("postgresql://u@h/d") == "postgresql://u@h/d"


def test_the_real_postgres_through_its_socket_is_another_database_too(
    socket_database_url: str,
) -> None:
    assert where(socket_database_url).server.startswith("socket /")
    sqlalchemys = "postgresql+psycopg" + socket_database_url.removeprefix("postgresql")
    for url in (socket_database_url, sqlalchemys):
        assert postgres_listens(url)
        with psycopg.connect(libpq_url(url)) as conn:
            row = conn.execute("SELECT current_database()").fetchone()
        assert row == (where(url).database,)


def test_a_socket_folder_with_no_server_in_it_is_not_listening(tmp_path) -> None:  # type: ignore[no-untyped-def]
    assert not postgres_listens(f"postgresql://postgres@/test?host={tmp_path}")
    assert not postgres_listens(f"postgresql://postgres@127.0.0.1:{free_port()}/test")


def test_a_driver_in_the_scheme_is_the_same_postgres_not_a_refusal(
    database_url: str, nats_url: str
) -> None:
    # the settings take postgresql+psycopg:// (SQLAlchemy's form); libpq does not
    sqlalchemys = "postgresql+psycopg" + database_url.removeprefix("postgresql")
    with ensure_platform(sqlalchemys, nats_url) as platform:
        assert not platform.embedded_postgres
        with psycopg.connect(platform.database_url) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
