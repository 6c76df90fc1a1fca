"""The roster's tables, and the only module of the roster that speaks SQL.

``roster.fleets``: which environment each fleet serves and the LiveKit it dispatches on (seed 000,
"A fleet per environment"). ``roster.keys``: every key, hashed (defined with its verifier in
:mod:`pinecall_servicekit.keys`, migrated here). Driver errors become ``StoreUnavailable``.
"""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncEngine

from pinecall_contracts.fleet import FleetRecord
from pinecall_contracts.ids import ENVIRONMENTS
from pinecall_contracts.keys import KeyCreated, KeyInfo, KeyKind
from pinecall_servicekit import db
from pinecall_servicekit.errors import NotFound, Unprocessable
from pinecall_servicekit.keys import EVERY_ENVIRONMENT, KEYS, key_info, new_secret
from pinecall_servicekit.migrations import Migrations

SCHEMA = "roster"
METADATA = KEYS.metadata
"""The roster's MetaData: ``keys`` (from servicekit) and ``fleets``, in schema ``roster``."""

FLEETS = sa.Table(
    "fleets",
    METADATA,
    sa.Column("name", sa.String(63), primary_key=True),
    sa.Column("environment", sa.String(32), nullable=False),
    sa.Column("livekit_url", sa.Text, nullable=False),
    sa.Column("created_at", db.UTC_TIMESTAMP, nullable=False, server_default=sa.func.now()),
)


migrate = Migrations(Path(__file__).parent / "migrations", SCHEMA)
"""The roster's migrations: ``migrate(url)`` runs them; the ``pinecall_runtime.migrations`` entry
point, which ``doctor`` also asks where a database stands."""


class Store:
    """Fleets and keys in Postgres."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def answers(self, timeout_s: float = 2.0) -> bool:
        """Whether Postgres answers a query within ``timeout_s`` seconds (readiness)."""
        return await db.answers(self.engine, timeout_s)

    async def ensure_fleets(self, fleets: list[FleetRecord]) -> None:
        """Insert each fleet not stored yet; a stored row is the operator's and stays."""
        if not fleets:
            return
        async with db.translate_errors("storing fleets"), self.engine.begin() as conn:
            await conn.execute(
                insert(FLEETS)
                .values(
                    [
                        {"name": f.name, "environment": f.environment, "livekit_url": f.livekit_url}
                        for f in fleets
                    ]
                )
                .on_conflict_do_nothing(index_elements=["name"])
            )

    async def fleets(self) -> list[FleetRecord]:
        async with db.translate_errors("reading fleets"), self.engine.connect() as conn:
            rows = (await conn.execute(sa.select(FLEETS).order_by(FLEETS.c.name))).all()
        return [
            FleetRecord(name=r.name, environment=r.environment, livekit_url=r.livekit_url)
            for r in rows
        ]

    async def create_key(
        self, kind: KeyKind, name: str, environment: str | None, *, person: str | None = None
    ) -> KeyCreated:
        """A new key; its secret is in the answer and nowhere else.

        Fleet and app keys need an environment (``production`` or ``sandbox``); operator and
        service keys take none. Raises ``Unprocessable`` otherwise.
        """
        if not (0 < len(name) <= 200 and name.isprintable() and name.strip() == name):
            raise Unprocessable("a key's name is 1 to 200 printable characters, no edge spaces")
        if kind in EVERY_ENVIRONMENT and environment is not None:
            article = "an" if kind == "operator" else "a"
            raise Unprocessable(
                f"{article} {kind} key acts in every environment: give no environment"
            )
        if kind not in EVERY_ENVIRONMENT and environment not in ENVIRONMENTS:
            raise Unprocessable(
                f"{'an' if kind == 'app' else 'a'} {kind} key needs an environment: "
                f"{' or '.join(ENVIRONMENTS)}"
            )
        key_id, token, digest = new_secret()
        now = db.utcnow()
        async with db.translate_errors("creating a key"), self.engine.begin() as conn:
            await conn.execute(
                sa.insert(KEYS).values(
                    id=key_id,
                    kind=kind,
                    name=name,
                    environment=environment,
                    secret_sha256=digest,
                    created_at=now,
                    person=person,
                )
            )
        info = KeyInfo(
            id=key_id,
            kind=kind,
            name=name,
            environment=environment,
            created_at=now,
            person=person,
        )
        return KeyCreated(key=info, secret=token)

    async def keys(self) -> list[KeyInfo]:
        async with db.translate_errors("listing keys"), self.engine.connect() as conn:
            rows = (await conn.execute(sa.select(KEYS).order_by(KEYS.c.created_at))).all()
        return [key_info(r) for r in rows]

    async def revoke_key(self, key_id: str) -> KeyInfo:
        """Revoke ``key_id`` (idempotent: a revoked key keeps its first revocation time).

        Raises ``NotFound`` for an unknown key.
        """
        async with db.translate_errors("revoking a key"), self.engine.begin() as conn:
            await conn.execute(
                sa.update(KEYS)
                .where(KEYS.c.id == key_id, KEYS.c.revoked_at.is_(None))
                .values(revoked_at=db.utcnow())
            )
            row = (await conn.execute(sa.select(KEYS).where(KEYS.c.id == key_id))).first()
        if row is None:
            raise NotFound(f"no key {key_id}")
        return key_info(row)
