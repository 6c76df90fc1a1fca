"""Serving and stopping: named exit codes, Granian serving a service's app factory, and the
``serve``/``migrate`` commands every HTTP service has.

SIGTERM drains (``shared/CONVENTIONS.md`` habit 7): Granian stops accepting, finishes the requests
in flight, then runs the app's lifespan exit, which drains NATS and closes the database pool.
Idle HTTP connections are kept 620 s, past the load balancer's 600 s (seed 000, "Three planes");
``PINECALL_KEEPALIVE_S`` changes it (a test serves with 3 s to watch Granian close one).
"""

from __future__ import annotations

import enum
import sys
from collections.abc import Callable
from typing import Protocol, TypeVar

import click

S = TypeVar("S")


class ExitCode(enum.IntEnum):
    """A process's exit status, the same in every service and the CLI."""

    OK = 0
    FAILED = 1
    USAGE = 2
    CORDONED = 3
    """A worker cordoned by an operator finished what it held (seed 000, "Deploys drain")."""
    PROBLEMS = 4
    """``doctor`` found something wrong now (a warning or a failure; ``DESIGN.md``)."""
    NOT_FOUND = 5
    """What the command names is known to nobody asked (``logs`` of an unknown call)."""
    UNAVAILABLE = 69
    """A dependency (Postgres, NATS, a service) did not answer (``EX_UNAVAILABLE``)."""
    CONFIG = 78
    """The settings are wrong (``EX_CONFIG``): an unknown ``PINECALL_*`` variable, a bad value."""


def settings_or_exit(load: Callable[[], S]) -> S:
    """``load()`` (a service's settings); on ``SettingsError`` says why and exits 78 (CONFIG)."""
    from pinecall_servicekit.settings import SettingsError

    try:
        return load()
    except SettingsError as exc:
        print(f"error [settings]: {exc}", file=sys.stderr)
        raise SystemExit(ExitCode.CONFIG) from exc


KEEP_ALIVE_S = 620
"""Idle keep-alive of every HTTP server, in seconds: past GCP's load balancer's 600 s (the default
of ``PINECALL_KEEPALIVE_S``, ``Settings.keepalive_s``)."""


def serve_http(target: str, *, host: str, port: int, keep_alive_s: float, workers: int = 1) -> None:
    """Serve the ASGI app factory ``target`` (``"pkg.app:create_app"``) with Granian; blocks.

    An idle keep-alive connection is closed ``keep_alive_s`` seconds after its last response
    (the service's ``keepalive_s`` setting). Granian 2.x has no idle timeout of its own: hyper's
    ``header_read_timeout`` times the wait for the next request's head, idle time included, and
    closes the connection when it runs out (``services/call-log/tests/test_keepalive.py`` watches
    it happen).

    Granian calls the factory in each worker process, so connections are opened after any fork.
    The event loop is uvloop's: every await of a request (its body, Postgres, NATS) is a wake-up of
    the loop, and uvloop's cost less (measured here: a bare ASGI app under Granian 0.37 ms of CPU a
    request against 0.52 on asyncio; a call-log batch ~7 % less).
    """
    from granian.constants import Interfaces, Loops
    from granian.http import HTTP1Settings
    from granian.server import Server

    Server(
        target,
        address=host,
        port=port,
        interface=Interfaces.ASGI,
        loop=Loops.uvloop,
        workers=workers,
        factory=True,
        http1_settings=HTTP1Settings(
            header_read_timeout=round(keep_alive_s * 1000), keep_alive=True
        ),
        log_access=False,
    ).serve()


class Served(Protocol):
    """What ``serve`` reads of a service's settings (``pinecall_servicekit.settings.Settings``)."""

    @property
    def host(self) -> str: ...
    @property
    def port(self) -> int: ...
    @property
    def keepalive_s(self) -> float: ...
    @property
    def database_url(self) -> str: ...


Loaded = TypeVar("Loaded", bound=Served)


def service_cli(
    name: str,
    *,
    about: str,
    app: str,
    settings: Callable[[], Loaded],
    check: Callable[[Loaded], object] | None = None,
    serves: str,
    migrate: Callable[[str], None] | None = None,
    workers: bool = True,
) -> click.Group:
    """The click group ``pinecall-runtime <name>`` of an HTTP service (``shared/CONVENTIONS.md``
    habit 4): ``serve`` (Granian on ``app``, a ``"pkg.app:create_app"`` factory; ``--workers``
    unless ``workers`` is False) and, given ``migrate`` (a database URL → None), ``migrate``.

    ``settings()`` loads the settings from the environment, then ``check(settings)`` (what the
    service reads of them later, its keys or its fleets rows; its answer is dropped) checks them:
    a ``SettingsError`` from either exits 78 (``error [settings]: ...``) before anything listens
    or migrates (a missing or malformed key fails at start, not at a request).
    ``about`` is the group's help, ``serves`` the serve command's. The service adds its own
    commands to the group it gets back.
    """

    @click.group(name=name, help=about)
    def group() -> None:
        pass

    def checked() -> Loaded:
        loaded = settings()
        if check is not None:
            check(loaded)
        return loaded

    def serve(workers: int = 1) -> None:
        loaded = settings_or_exit(checked)
        serve_http(
            app,
            host=loaded.host,
            port=loaded.port,
            keep_alive_s=loaded.keepalive_s,
            workers=workers,
        )

    command = click.Command("serve", callback=serve, help=serves)
    if workers:
        command.params.append(
            click.Option(
                ["--workers"], default=1, show_default=True, help="Granian worker processes."
            )
        )
    group.add_command(command)
    if migrate is not None:
        run_migrations = migrate

        def migrate_command() -> None:
            run_migrations(settings_or_exit(checked).database_url)
            click.echo(f"{name}: migrated")

        group.add_command(
            click.Command(
                "migrate",
                callback=migrate_command,
                help=f"Run the {name}'s migrations on PINECALL_DATABASE_URL.",
            )
        )
    return group
