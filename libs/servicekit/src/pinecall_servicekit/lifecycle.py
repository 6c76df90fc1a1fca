"""Serving and stopping: named exit codes, and Granian serving a service's app factory.

SIGTERM drains (``shared/CONVENTIONS.md`` habit 7): Granian stops accepting, finishes the requests
in flight, then runs the app's lifespan exit, which drains NATS and closes the database pool.
Idle HTTP connections are kept 620 s, past the load balancer's 600 s (seed 000, "Three planes").
"""

from __future__ import annotations

import enum
import sys
from collections.abc import Callable
from typing import TypeVar

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
"""Idle keep-alive of every HTTP server, in seconds: past GCP's load balancer's 600 s."""


def serve_http(target: str, *, host: str, port: int, workers: int = 1) -> None:
    """Serve the ASGI app factory ``target`` (``"pkg.app:create_app"``) with Granian; blocks.

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
        http1_settings=HTTP1Settings(header_read_timeout=KEEP_ALIVE_S * 1000, keep_alive=True),
        log_access=False,
    ).serve()
