"""Keys: operator, fleet (bound to one environment), app (bound to one environment) and service
keys, stored hashed.

A key reads ``pck_<id>_<secret>``: ``id`` (12 hex) finds the row, and only the SHA-256 of the
secret is stored (the secret is 256 random bits, so a fast hash is enough: nothing to brute-force).
The table is owned and migrated by the roster (``roster.keys``); every service verifies keys
through :class:`KeyRing`, which remembers a verified key 5 s and forgets it at once when a
revocation is said on NATS (seed 000, "Three planes, each grows on its own").
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import re
import secrets
import time
from collections.abc import Collection
from typing import Any, Final

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from pinecall_contracts.keys import KeyInfo, KeyKind, KeyRevoked
from pinecall_contracts.persons import PersonChanged
from pinecall_servicekit.bus import Bus
from pinecall_servicekit.changes import Changes
from pinecall_servicekit.db import UTC_TIMESTAMP, autocommit, metadata, translate_errors
from pinecall_servicekit.errors import Forbidden, Unauthorized
from pinecall_servicekit.persons import ORGS, PERSONS, Holder, person_info

OPERATOR: Final[tuple[KeyKind, ...]] = ("operator",)
"""The ops verbs (cordons, keys, quotas, …): a person's, never a service's."""
FLEET: Final[tuple[KeyKind, ...]] = ("fleet",)
"""A worker's heartbeat and KEDA's read of wanted workers."""
SERVICE_OR_OPERATOR: Final[tuple[KeyKind, ...]] = ("service", "operator")
"""What one service reads or posts of another in production (the roster's rows, call-log's
ends, seals and agents' logs): a service's own key, or an operator doing the same by hand."""
EVERY_ENVIRONMENT: Final[frozenset[KeyKind]] = frozenset({"operator", "service"})
"""The kinds bound to no environment: they act in every one (and name it where it matters)."""

KEY_PATTERN = re.compile(r"^pck_([0-9a-f]{12})_([A-Za-z0-9_-]{20,128})$")

KEYS = sa.Table(
    "keys",
    metadata("roster"),
    sa.Column("id", sa.String(12), primary_key=True),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("environment", sa.String(32), nullable=True),
    sa.Column("secret_sha256", sa.String(64), nullable=False),
    sa.Column("created_at", UTC_TIMESTAMP, nullable=False),
    sa.Column("revoked_at", UTC_TIMESTAMP, nullable=True),
    sa.Column("person", sa.String(12), nullable=True),
)


_KEY_BY_ID = (
    sa.select(
        KEYS,
        *(c.label(f"p_{c.name}") for c in PERSONS.c),
        ORGS.c.environments.label("o_environments"),
    )
    .select_from(
        KEYS.outerjoin(PERSONS, PERSONS.c.id == KEYS.c.person).outerjoin(
            ORGS, ORGS.c.name == PERSONS.c.org
        )
    )
    .where(KEYS.c.id == sa.bindparam("id"))
)
"""A key's row by its id, with its person's and its person's org's (built once; SQLAlchemy
caches its compiled form)."""


def new_secret() -> tuple[str, str, str]:
    """``(id, token, sha256 of the secret)`` for a new key; the token is shown once."""
    key_id = secrets.token_hex(6)
    secret = secrets.token_urlsafe(32)
    return key_id, f"pck_{key_id}_{secret}", hashlib.sha256(secret.encode()).hexdigest()


def key_info(row: sa.Row[Any]) -> KeyInfo:
    """A ``roster.keys`` row as the operator sees it (never its secret)."""
    return KeyInfo(
        id=row.id,
        kind=row.kind,
        name=row.name,
        environment=row.environment,
        created_at=row.created_at,
        revoked_at=row.revoked_at,
        person=row.person,
    )


def _holder(row: sa.Row[Any]) -> Holder:
    """A row of :data:`_KEY_BY_ID` as the policy reads it."""
    if row.p_id is None:
        return Holder(key_info(row))
    person = person_info(row, prefix="p_")
    environments = tuple(row.o_environments) if row.o_environments is not None else ()
    return Holder(key_info(row), person, environments)


def bearer(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, or None."""
    if not authorization:
        return None
    scheme, _, token = authorization.partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


class KeyRing:
    """Verifies keys against ``roster.keys`` (with each key's person and org); remembers each
    verified key ``cache_s`` seconds.

    :meth:`start` subscribes to revocations (``<ns>.keys.revoked``) and to persons changed
    (``<ns>.persons.changed``), so a key revoked, or a person changed, at any endpoint is forgotten
    here at once (issue 21); :attr:`changes` is notified after each, and
    :attr:`forgotten` counts them: a replica's own notice that it forgot.

    A token verified once is known by itself while its key is remembered: a request with it pays
    one dict lookup, no parse and no hash. Requests that find a key forgotten (its 5 s ran out)
    share one read of its row: a replica at 200 requests a second otherwise sent a read for each
    request arriving while the first was in flight (3 % of its samples under ``load``, issue 20).
    """

    def __init__(self, engine: AsyncEngine, bus: Bus, *, cache_s: float = 5.0) -> None:
        self._reads = autocommit(engine)
        """One statement, no BEGIN and ROLLBACK around it (:func:`.db.autocommit`)."""
        self._bus = bus
        self._cache_s = cache_s
        self._cache: dict[str, tuple[float, Holder, str]] = {}
        """key id → (remembered until, the key and its person, the SHA-256 of its secret)."""
        self._tokens: dict[str, tuple[float, Holder]] = {}
        """token → (remembered until, its key): tokens whose secret matched, one a key."""
        self._reading: dict[str, asyncio.Future[tuple[Holder, str] | None]] = {}
        """key id → the read of its row in flight, which every request missing it awaits."""
        self.changes = Changes()
        """Notified after each revocation or person changed heard on NATS."""
        self.forgotten = 0
        """Revocations and persons changed heard on NATS so far (each forgotten at once)."""

    async def start(self) -> None:
        async def on_revoked(message: KeyRevoked) -> None:
            self.forget(message.id)
            self.forgotten += 1
            await self.changes.notify()

        async def on_person(message: PersonChanged) -> None:
            self.forget_person(message.id)
            self.forgotten += 1
            await self.changes.notify()

        await self._bus.subscribe(self._bus.subjects.key_revoked, KeyRevoked, on_revoked)
        await self._bus.subscribe(self._bus.subjects.person_changed, PersonChanged, on_person)

    def remembers(self, key_id: str) -> bool:
        """Whether ``key_id`` is in the cache now (verified less than ``cache_s`` ago)."""
        cached = self._cache.get(key_id)
        return bool(cached and cached[0] > time.monotonic())

    def forget(self, key_id: str) -> None:
        """Drop ``key_id`` from the cache: its next use reads the table (a read in flight is
        not waited for, and what it finds is not remembered)."""
        self._cache.pop(key_id, None)
        self._reading.pop(key_id, None)
        for token in [t for t, (_, h) in self._tokens.items() if h.key.id == key_id]:
            del self._tokens[token]

    def forget_person(self, person_id: str) -> None:
        """Drop every key of ``person_id`` from the cache (:meth:`forget`), and every read in
        flight (it may have read the person before the change)."""
        held = {k for k, (_, h, _) in self._cache.items() if _person_id(h) == person_id}
        held |= {h.key.id for _, h in self._tokens.values() if _person_id(h) == person_id}
        for key_id in held | set(self._reading):
            self.forget(key_id)

    async def _read(self, key_id: str) -> tuple[Holder, str] | None:
        """The key ``key_id`` (with its person) and its secret's hash from the table (None: no
        such key), remembered unless it is revoked or :meth:`forget` was told of it meanwhile."""
        async with translate_errors("verifying a key"), self._reads.connect() as conn:
            row = (await conn.execute(_KEY_BY_ID, {"id": key_id})).first()
        if row is None:
            return None
        holder = _holder(row)
        reading = self._reading.get(key_id)
        if (
            holder.key.revoked_at is None
            and reading is not None
            and reading is asyncio.current_task()
        ):
            self._cache[key_id] = (time.monotonic() + self._cache_s, holder, row.secret_sha256)
        return holder, row.secret_sha256

    async def _row(self, key_id: str) -> tuple[Holder, str] | None:
        """:meth:`_read`, one at a time a key: a request missing it joins the read in flight."""
        reading = self._reading.get(key_id)
        if reading is None:
            reading = self._reading[key_id] = asyncio.ensure_future(self._read(key_id))

            def done(task: asyncio.Future[tuple[Holder, str] | None]) -> None:
                if self._reading.get(key_id) is task:
                    del self._reading[key_id]
                if not task.cancelled():
                    task.exception()  # said to whoever awaited it; never "never retrieved"

            reading.add_done_callback(done)
        # a request cancelled (its client gone) leaves the read to the others
        return await asyncio.shield(reading)

    async def _known(self, token: str) -> Holder:
        """The key ``token`` names, revoked or not; ``Unauthorized`` for a malformed one, an
        unknown one, or a secret that is not the key's."""
        now = time.monotonic()
        hit = self._tokens.get(token)
        if hit is not None and hit[0] > now:
            return hit[1]
        match = KEY_PATTERN.match(token)
        if not match:
            raise Unauthorized("not a Pinecall key")
        key_id, secret = match.groups()
        cached = self._cache.get(key_id)
        if cached is not None and cached[0] > now:
            until, holder, stored = cached
        else:
            found = await self._row(key_id)
            if found is None:
                raise Unauthorized("unknown key")
            (holder, stored), until = found, 0.0
        if not hmac.compare_digest(stored, hashlib.sha256(secret.encode()).hexdigest()):
            raise Unauthorized("unknown key")
        if until > now:
            self._tokens[token] = (until, holder)
        return holder

    async def holder(self, token: str | None) -> Holder:
        """The key ``token`` names and its person: ``Unauthorized`` (401) for no key, a
        malformed, unknown or revoked one. What it may do is the policy's
        (:func:`pinecall_servicekit.policy.check`)."""
        if not token:
            raise Unauthorized("no key: send Authorization: Bearer <key>")
        holder = await self._known(token)
        if holder.key.revoked_at is not None:
            raise Unauthorized("revoked key")
        return holder

    async def verify(
        self,
        token: str | None,
        *,
        kinds: Collection[KeyKind],
        environment: str | None = None,
    ) -> KeyInfo:
        """The key ``token`` names, if it is of one of ``kinds`` (the kind gate alone: routes and
        verbs go through the policy, :func:`pinecall_servicekit.policy.check`).

        Raises ``Unauthorized`` (401) for no key, a malformed, unknown or revoked one, and
        ``Forbidden`` (403) for a key of another kind, or a fleet or app key of another environment
        than ``environment`` (when given). Operator and service keys act in every environment.
        """
        info = (await self.holder(token)).key
        if info.kind not in kinds:
            article = "an" if info.kind[0] in "aeiou" else "a"
            raise Forbidden(
                f"{article} {info.kind} key cannot do this (needs {' or '.join(kinds)})"
            )
        if environment and info.kind not in EVERY_ENVIRONMENT and info.environment != environment:
            raise Forbidden(f"a key of {info.environment} cannot act for {environment}")
        return info


def _person_id(holder: Holder) -> str | None:
    return holder.person.id if holder.person is not None else None
