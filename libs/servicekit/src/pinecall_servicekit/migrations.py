"""A service's migrations as one value: run them, and say how far a database is from them.

Each service registers its :class:`Migrations` as the entry point ``pinecall_runtime.migrations``
(``pinecall_call_log.store:migrate``). Called with a URL it migrates, as the plain function it
replaces did (``migrate``, the Helm pre-upgrade hook); :meth:`Migrations.status` is what
``doctor`` reads: the heads of the scripts installed here against the revisions in the
service's version table (``<schema>.alembic_version``, ``shared/CONVENTIONS.md`` habit 14).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import msgspec
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from pinecall_servicekit import db

Standing = Literal["at_head", "behind", "ahead", "never"]
"""``at_head``: the database has every script installed here. ``behind``: it lacks some (run
``migrate``). ``ahead``: it holds a revision these scripts do not know (a newer release migrated
it; this installation is older). ``never``: the schema has no version table."""


class MigrationStatus(msgspec.Struct, frozen=True, kw_only=True):
    """Where a database stands against one service's migrations."""

    schema: str
    heads: list[str]
    """The newest revisions of the scripts installed here."""
    applied: list[str]
    """The revisions the database's version table holds (empty: never migrated)."""
    standing: Standing


class Migrations:
    """A service's alembic scripts (``script_location``) and the schema its tables live in."""

    def __init__(self, script_location: Path, schema: str) -> None:
        self.script_location = script_location
        self.schema = schema

    def __call__(self, url: str) -> None:
        """Migrate the database at ``url`` to the head (blocking; call it from a thread)."""
        db.migrate(url, self.script_location, self.schema)

    def __repr__(self) -> str:
        return f"Migrations({self.schema!r})"

    def heads(self) -> list[str]:
        """The revisions at the head of the installed scripts, sorted (one, unless they branch)."""
        from alembic.script import ScriptDirectory

        return sorted(ScriptDirectory(str(self.script_location)).get_heads())

    async def status(self, engine: AsyncEngine) -> MigrationStatus:
        """Where the database of ``engine`` stands; ``StoreUnavailable`` if it does not answer.

        Behind means some installed revision is not an ancestor of (or equal to) an applied
        one; ahead means an applied revision is unknown to the installed scripts.
        """
        from alembic.script import ScriptDirectory
        from alembic.script.revision import RevisionError

        scripts = ScriptDirectory(str(self.script_location))
        heads = self.heads()
        applied = await self._applied(engine)
        if not applied:
            standing: Standing = "never"
        else:
            try:
                reached = {
                    r.revision for rev in applied for r in scripts.iterate_revisions(rev, "base")
                }
            except RevisionError:  # a revision these scripts do not know
                standing = "ahead"
            else:
                standing = "at_head" if set(heads) <= reached else "behind"
        return MigrationStatus(schema=self.schema, heads=heads, applied=applied, standing=standing)

    async def _applied(self, engine: AsyncEngine) -> list[str]:
        table = sa.table("alembic_version", sa.column("version_num"), schema=self.schema)
        async with db.translate_errors(f"reading {self.schema}'s version"), engine.connect() as c:
            exists = await c.scalar(
                sa.text("SELECT to_regclass(:name) IS NOT NULL"),
                {"name": f'"{self.schema}".alembic_version'},
            )
            if not exists:
                return []
            return sorted((await c.execute(sa.select(table.c.version_num))).scalars())
