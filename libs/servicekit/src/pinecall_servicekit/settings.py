"""Settings from the environment, read once per process (``shared/CONVENTIONS.md`` habit 3).

A service declares a frozen msgspec Struct of its settings, built once in ``main.py`` with
:meth:`Settings.from_env` and passed down. A field ``nats_url`` is read from ``PINECALL_NATS_URL``
unless the class maps it to another name (LiveKit's own stay LiveKit's: ``LIVEKIT_URL``). Every
``PINECALL_*`` name must be in :data:`pinecall_contracts.environment.PINECALL_VARIABLES`, and a
``PINECALL_*`` variable in the environment that is in no registry raises :class:`SettingsError`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Self
from urllib.parse import urlsplit

import msgspec

from pinecall_contracts.environment import PINECALL_VARIABLES
from pinecall_servicekit.lifecycle import KEEP_ALIVE_S
from pinecall_servicekit.natsauth import redact

PREFIX = "PINECALL_"
NATS_SCHEMES = frozenset({"nats", "tls", "ws", "wss"})


Port = Annotated[int, msgspec.Meta(ge=0, le=65535)]
"""A TCP port a service listens on (0: any free one)."""
HttpUrl = Annotated[str, msgspec.Meta(pattern=r"^https?://[^\s/?#]+(?:[/?#]\S*)?$(?![\s\S])")]
"""An http(s) URL of a service (``PINECALL_CALL_LOG_URL``): a host after the scheme, no blank."""


class SettingsError(ValueError):
    """The environment names an unknown ``PINECALL_*`` variable or holds a value of a wrong type."""


class Settings(msgspec.Struct, frozen=True, kw_only=True):
    """What every service reads: where Postgres and NATS are, and how it logs."""

    ENV_NAMES: ClassVar[Mapping[str, str]] = {}
    """Fields read from a name other than ``PINECALL_<FIELD>``."""

    database_url: str = "postgresql://postgres@127.0.0.1:5432/test"
    """Postgres, as a libpq URL (``postgresql://`` or ``postgresql+psycopg://``)."""
    nats_url: str = "nats://127.0.0.1:4222"
    nats_namespace: str = "pinecall"
    """First token of every subject and prefix of every bucket (one per test)."""
    log_level: str = "INFO"
    log_format: str = "json"
    """``json`` (one object a line, with trace and span ids) or ``text``."""
    traces_file: str | None = None
    """A file the process appends its spans to, one JSON object a line (``up --traces``;
    ``telemetry.configure_tracing``); None: OTLP by the ``OTEL_*`` variables, or none kept."""
    keepalive_s: Annotated[float, msgspec.Meta(gt=0)] = KEEP_ALIVE_S
    """How long an HTTP service keeps an idle keep-alive connection, in seconds (Granian's
    HTTP/1 ``header_read_timeout``, ``lifecycle.serve_http``): 620, past the load balancer's 600
    (seed 000, "Three planes"), so the balancer, not the service, closes an idle connection."""

    @classmethod
    def env_name(cls, field: str) -> str:
        """The environment variable ``field`` is read from."""
        return cls.ENV_NAMES.get(field, PREFIX + field.upper())

    def to_env(self) -> dict[str, str]:
        """These settings as the environment that :meth:`from_env` reads back (None left out):
        how a process hands its settings to the processes it starts."""
        out = {}
        for field in msgspec.structs.fields(self):
            value = getattr(self, field.name)
            if value is not None:
                out[self.env_name(field.name)] = (
                    str(value).lower() if isinstance(value, bool) else str(value)
                )
        return out

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> Self:
        """Settings from ``environ`` (default ``os.environ``), then ``overrides``.

        Raises :class:`SettingsError` for an unknown ``PINECALL_*`` variable, a value that does
        not convert to its field's type (``PINECALL_PORT=eighty``), or a number that is NaN or
        infinite (``PINECALL_MAX_CALL_SECONDS=nan`` would end every call the moment it opened).
        """
        env = os.environ if environ is None else environ
        unknown = sorted(n for n in env if n.startswith(PREFIX) and n not in PINECALL_VARIABLES)
        if unknown:
            raise SettingsError(f"unknown setting(s): {', '.join(unknown)}")
        raw: dict[str, Any] = {}
        for field in msgspec.structs.fields(cls):
            name = cls.env_name(field.name)
            if name.startswith(PREFIX) and name not in PINECALL_VARIABLES:
                raise SettingsError(f"{cls.__name__}.{field.name} reads unregistered {name}")
            if name in env:
                raw[field.name] = env[name]
        raw.update(overrides)
        try:
            settings = msgspec.convert(raw, cls, strict=False)
        except msgspec.ValidationError as exc:
            raise SettingsError(f"{cls.__name__}: {exc}") from exc
        for field in msgspec.structs.fields(cls):
            value = getattr(settings, field.name)
            if isinstance(value, float) and not math.isfinite(value):
                raise SettingsError(f"{cls.env_name(field.name)}: {value} is not a number")
        settings.check_urls()
        return settings

    def check_urls(self) -> None:
        """``SettingsError`` for a database or NATS URL that is no such URL (read at start,
        not at the first connection, where it would be a driver's traceback).

        Only the scheme is read (``urllib``), as for NATS: SQLAlchemy's parser would cost every
        process that reads settings its import, 0.57 s measured in a worker's job process before
        it joined its room (stop 13, ``lab run death``)."""
        if _scheme_host(self.database_url)[0].split("+", 1)[0] != "postgresql":
            raise SettingsError(
                f"{self.env_name('database_url')}: not a postgresql:// URL: {self.database_url!r}"
            )
        for server in self.nats_url.split(","):
            scheme, host = _scheme_host(server.strip())
            if scheme not in NATS_SCHEMES or not host:
                raise SettingsError(
                    f"{self.env_name('nats_url')}: not a nats:// URL: {redact(self.nats_url)!r}"
                )


def _scheme_host(url: str) -> tuple[str, str | None]:
    """A URL's scheme and host name; ``("", None)`` for what does not parse (an unclosed ``[``
    of an IPv6 host)."""
    try:
        parts = urlsplit(url)
        return parts.scheme, parts.hostname
    except ValueError:
        return "", None


def by_environment(text: str, setting: str) -> dict[str, str]:
    """``production=A,sandbox=B`` as ``{"production": "A", "sandbox": "B"}`` (blanks ignored);
    ``SettingsError`` naming ``setting`` for an item that is not ``<environment>=<value>``."""
    found: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        environment, sep, value = item.partition("=")
        if not (sep and environment.strip() and value.strip()):
            raise SettingsError(f"{setting}: not <environment>=<value>: {item!r}")
        found[environment.strip()] = value.strip()
    return found


def livekit_keys(
    text: str, api_key: str | None = None, api_secret: str | None = None
) -> dict[str, tuple[str, str]]:
    """Each environment's LiveKit API key and secret: ``PINECALL_LIVEKIT_KEYS``
    (``production=KEY:SECRET,sandbox=KEY:SECRET``), with ``LIVEKIT_API_KEY``/``_SECRET`` as
    production's where it names no production. ``SettingsError`` when malformed or empty."""
    keys: dict[str, tuple[str, str]] = {}
    for environment, pair in by_environment(text, "PINECALL_LIVEKIT_KEYS").items():
        key, colon, secret = pair.partition(":")
        if not (colon and key and secret):
            raise SettingsError(f"PINECALL_LIVEKIT_KEYS: not <env>=<key>:<secret>: {environment}")
        keys[environment] = (key, secret)
    if "production" not in keys and api_key and api_secret:
        keys["production"] = (api_key, api_secret)
    if not keys:
        raise SettingsError("no LiveKit keys: set LIVEKIT_API_KEY/SECRET or PINECALL_LIVEKIT_KEYS")
    return keys
