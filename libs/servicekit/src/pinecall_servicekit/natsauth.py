"""Who may publish and subscribe to what on NATS: one user per principal (issue 21).

nats-server's own authorization (its ``authorization { users = [...] }`` block, each user with
``permissions { publish, subscribe }`` allow lists; anything not allowed is refused by the server,
which answers the client with ``-ERR 'Permissions Violation ...'``) carries it, so no crypto is
ours. The subjects come from :class:`pinecall_contracts.subjects.Subjects`:

=================  ==========================================================================
principal          allowed
=================  ==========================================================================
a service          its namespace (``<ns>.>``), JetStream's and KV's API (``$JS.>``, ``$KV.>``),
                   ``nats.micro`` discovery (``$SRV.>``) and reply inboxes (``_INBOX.>``); the
                   operator's CLI is such a principal (``cli``): its verbs check the key anyway
a fleet ``f``      publish and subscribe ``<ns>.fleet.heartbeat.<f>.*`` (its own workers'
                   heartbeats) and subscribe its own inboxes ``_INBOX_<f>.>`` (a client that
                   asks passes ``inbox_prefix``); nothing of another fleet, no other subject
=================  ==========================================================================

:func:`server_config` is the config nats-server reads (``-c``); it is JSON, which nats-server's
config format takes as it is. ``up`` writes one for the nats-server it starts itself
(``platform.embedded_nats``); against a NATS of your own, configure the same users there.
"""

from __future__ import annotations

import json
import re
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from pinecall_contracts.ids import FLEET_PATTERN
from pinecall_contracts.subjects import Subjects

_FLEET = re.compile(FLEET_PATTERN)


class NatsAuthError(ValueError):
    """A principal that cannot be a NATS user: a bad fleet or service name."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NatsUser:
    """One NATS user: its name, its password (``secrets.token_urlsafe``, 32 characters) and the
    subjects it may publish and subscribe to (NATS wildcards ``*`` and ``>``)."""

    user: str
    password: str = field(repr=False)
    publish: tuple[str, ...]
    subscribe: tuple[str, ...]
    inbox_prefix: str = "_INBOX"
    """What the user's client passes as nats-py's ``inbox_prefix`` (its replies come there)."""

    def permissions(self) -> dict[str, Any]:
        """The user as nats-server's config says it."""
        return {
            "user": self.user,
            "password": self.password,
            "permissions": {
                "publish": {"allow": list(self.publish)},
                "subscribe": {"allow": list(self.subscribe)},
            },
        }

    def url(self, server: str) -> str:
        """``server`` (``nats://host:port``) with this user's name and password in it: a
        secret, never to be logged (:func:`redact` it)."""
        parts = urlsplit(server)
        netloc = f"{quote(self.user, safe='')}:{quote(self.password, safe='')}@{parts.netloc}"
        return urlunsplit(parts._replace(netloc=netloc))


def _password() -> str:
    return secrets.token_urlsafe(24)


def service_user(service: str, namespace: str, password: str | None = None) -> NatsUser:
    """The user of a service (``roster``, ``dispatcher``, … or ``cli``): its namespace and the
    platform's APIs. ``NatsAuthError`` for a name that is not ``[a-z][a-z0-9-]*``."""
    if not re.fullmatch(r"[a-z][a-z0-9-]{0,62}", service):
        raise NatsAuthError(f"not a service's name: {service!r}")
    ns = Subjects(namespace).namespace
    allowed = (f"{ns}.>", "$JS.>", "$KV.>", "$SRV.>", "_INBOX.>")
    return NatsUser(
        user=f"{ns}-{service}", password=password or _password(), publish=allowed,
        subscribe=allowed,
    )  # fmt: skip


def fleet_user(fleet: str, namespace: str, password: str | None = None) -> NatsUser:
    """The user of fleet ``fleet``'s workers: its own heartbeats and its own inboxes only.
    ``NatsAuthError`` for a name that is not a fleet's (``ids.FLEET_PATTERN``)."""
    if not _FLEET.match(fleet):
        raise NatsAuthError(f"not a fleet's name: {fleet!r}")
    subjects = Subjects(namespace)
    inbox = f"_INBOX_{fleet}"
    return NatsUser(
        user=f"{subjects.namespace}-fleet-{fleet}",
        password=password or _password(),
        publish=(subjects.fleet_heartbeats(fleet),),
        subscribe=(subjects.fleet_heartbeats(fleet), f"{inbox}.>"),
        inbox_prefix=inbox,
    )


def server_config(users: list[NatsUser]) -> str:
    """nats-server's config (JSON) allowing exactly ``users``; ``NatsAuthError`` if two share a
    name or there are none (a server with no user would let anyone in)."""
    names = [u.user for u in users]
    if not names or len(set(names)) != len(names):
        raise NatsAuthError(f"NATS users must be some and distinct: {names}")
    return json.dumps({"authorization": {"users": [u.permissions() for u in users]}}, indent=2)


def write_config(path: Path, users: list[NatsUser]) -> Path:
    """:func:`server_config` written to ``path``, readable by its owner only (it holds
    passwords)."""
    path.touch(mode=0o600, exist_ok=True)
    path.chmod(0o600)
    path.write_text(server_config(users))
    return path


def redact(url: str) -> str:
    """``url`` with any password replaced by ``***``: what a log line may say of a NATS URL."""
    out = []
    for one in url.split(","):
        parts = urlsplit(one)
        if parts.password is None:
            out.append(one)
            continue
        host = parts.netloc.rpartition("@")[2]
        out.append(urlunsplit(parts._replace(netloc=f"{parts.username}:***@{host}")))
    return ",".join(out)
