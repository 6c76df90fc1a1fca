"""Database URLs, built and read in one place, as libpq reads them.

A Postgres URL may name its server in the netloc (``postgresql://u@127.0.0.1:5432/db``), in the
query (``postgresql://u@/db?host=/tmp/pg``: a Unix socket folder, what the embedded Postgres
hands out), percent-encoded in the netloc (``postgresql://u@%2Fvar%2Frun%2Fpostgresql/db``) or as
several hosts (``postgresql://h1,h2/db``); its scheme may carry SQLAlchemy's driver
(``postgresql+psycopg://``). Neither a ``host:port/db`` string nor SQLAlchemy's ``make_url``
round-trips all of them; these functions do: :func:`with_database` changes only the URL's path,
and :func:`where` reads what libpq reads (its own parser, through psycopg).

Only the standard library at import (psycopg only once a URL is read, by :func:`conninfo`).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote, urlsplit

LIBPQ_SCHEMES = ("postgresql", "postgres")


def libpq_url(url: str) -> str:
    """``url`` as libpq (psycopg) takes it: ``postgresql+psycopg://…`` as ``postgresql://…``;
    anything else unchanged."""
    scheme, sep, rest = url.partition("://")
    if sep and scheme.split("+", 1)[0] in LIBPQ_SCHEMES and "+" in scheme:
        return f"postgresql://{rest}"
    return url


def with_database(url: str, name: str) -> str:
    """``url`` pointing at database ``name``: its path replaced (and a ``dbname`` in its query
    dropped), everything else (scheme, user, password, hosts, a socket folder's ``?host=``,
    other parameters) kept as written."""
    parts = urlsplit(url)
    query = "&".join(p for p in parts.query.split("&") if p and p.split("=", 1)[0] != "dbname")
    # by hand: urlunsplit drops the ``//`` of an empty netloc (``postgresql:///db?host=…``)
    return f"{parts.scheme}://{parts.netloc}/{quote(name, safe='')}" + (query and f"?{query}")


def conninfo(url: str) -> dict[str, str]:
    """What libpq reads from ``url`` (``host``, ``port``, ``dbname``, ``user``, …; psycopg's
    ``conninfo_to_dict``). Raises ``ValueError`` for what libpq cannot parse."""
    import psycopg  # not at import: psycopg costs a settings reader ~0.7 s cold

    try:
        return {k: str(v) for k, v in psycopg.conninfo.conninfo_to_dict(libpq_url(url)).items()}
    except psycopg.ProgrammingError as exc:
        raise ValueError(f"not a Postgres URL libpq reads: {exc}") from exc


def is_socket_folder(host: str) -> bool:
    """Whether libpq reads ``host`` as a Unix socket's folder (an absolute path, or ``@`` for
    Linux's abstract namespace) rather than a host name."""
    return host.startswith(("/", "@"))


@dataclass(frozen=True, slots=True)
class Where:
    """Where a database URL points, as a reader wants it: the database's name alone, and each
    (host, port) libpq tries in turn (a host that starts with ``/`` is a socket folder; None is
    libpq's default, which is a socket folder too)."""

    database: str
    endpoints: tuple[tuple[str | None, int], ...]

    @property
    def server(self) -> str:
        """``127.0.0.1:5432``, ``socket /tmp/pg (port 5432)``, ``h1:5432,h2:5433``; never the
        password."""
        said = []
        for host, port in self.endpoints:
            if host is None:
                said.append(f"libpq's default socket (port {port})")
            elif is_socket_folder(host):
                said.append(f"socket {host} (port {port})")
            else:
                said.append(f"[{host}]:{port}" if ":" in host else f"{host}:{port}")
        return ",".join(said)

    def __str__(self) -> str:
        return f"database {self.database} on {self.server}"


def where(url: str) -> Where:
    """Where ``url`` points, read by libpq's parser. Raises ``ValueError`` for what libpq cannot
    parse (or a port that is no number)."""
    info = conninfo(url)
    hosts = info["host"].split(",") if info.get("host") else [""]
    ports = info["port"].split(",") if info.get("port") else [""]
    if len(ports) == 1:
        ports *= len(hosts)
    if len(ports) != len(hosts):
        raise ValueError(f"{len(hosts)} hosts but {len(ports)} ports in {libpq_url(url)!r}")
    try:
        endpoints = tuple(
            (host or None, int(port) if port else 5432)
            for host, port in zip(hosts, ports, strict=True)
        )
    except ValueError as exc:
        raise ValueError(f"a port that is no number in {libpq_url(url)!r}") from exc
    database = info.get("dbname") or info.get("user") or "(libpq's default)"
    return Where(database=database, endpoints=endpoints)


def describe(url: str) -> str:
    """``database pc on 127.0.0.1:5432`` (:class:`Where`, no password), or, for what libpq cannot
    parse, what is wrong with it: for messages, never raises."""
    try:
        return str(where(url))
    except ValueError as exc:
        return f"an unreadable database URL ({exc})"


def without_password(url: str) -> str:
    """``url`` with its password (in the netloc or a ``password=`` parameter) as ``***``: a URL
    to print."""
    parts = urlsplit(url)
    netloc = parts.netloc
    auth, at, hosts = netloc.rpartition("@")
    if at and ":" in auth:
        netloc = f"{auth.split(':', 1)[0]}:***@{hosts}"
    query = "&".join(
        "password=***" if p.split("=", 1)[0] == "password" else p
        for p in parts.query.split("&")
        if p
    )
    return f"{parts.scheme}://{netloc}{parts.path}" + (query and f"?{query}")
