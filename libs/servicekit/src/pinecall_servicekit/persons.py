"""The orgs and persons tables (``roster.orgs``, ``roster.persons``; issue 21), as every service's
:class:`~pinecall_servicekit.keys.KeyRing` reads them beside ``roster.keys``.

Owned and migrated by the roster (``0003_orgs_and_persons``); the other services only read them,
through the key ring. :class:`Holder` is what a verified key carries into the one check
(:mod:`pinecall_servicekit.policy`): the key, its person (None for a key of no person) and the
environments the person's org may use.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from pinecall_contracts.keys import KeyInfo
from pinecall_contracts.persons import OrgInfo, PersonInfo
from pinecall_servicekit.db import UTC_TIMESTAMP, metadata

_META = metadata("roster")

ORGS = sa.Table(
    "orgs",
    _META,
    sa.Column("name", sa.String(128), primary_key=True),
    sa.Column("environments", postgresql.ARRAY(sa.String(32)), nullable=False),
    sa.Column("quotas", postgresql.JSONB, nullable=False),
    sa.Column("created_at", UTC_TIMESTAMP, nullable=False),
)

PERSONS = sa.Table(
    "persons",
    _META,
    sa.Column("id", sa.String(12), primary_key=True),
    sa.Column("org", sa.String(128), nullable=False),
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("role", sa.String(16), nullable=False),
    sa.Column("agents", postgresql.ARRAY(sa.String(128)), nullable=True),
    sa.Column("production", sa.Boolean, nullable=False),
    sa.Column("operator", sa.Boolean, nullable=False),
    sa.Column("disabled", sa.Boolean, nullable=False),
    sa.Column("created_at", UTC_TIMESTAMP, nullable=False),
)


@dataclass(frozen=True, slots=True)
class Holder:
    """A verified key and who holds it: what the policy checks."""

    key: KeyInfo
    person: PersonInfo | None = None
    """None: a key of no person (fleet and service keys, and every key made before persons)."""
    environments: tuple[str, ...] | None = None
    """The environments the person's org may use (None: no person)."""


def org_info(row: sa.Row[Any]) -> OrgInfo:
    """A ``roster.orgs`` row on the wire."""
    return OrgInfo(
        name=row.name,
        environments=list(row.environments),
        quotas=dict(row.quotas),
        created_at=row.created_at,
    )


def person_info(row: sa.Row[Any], *, prefix: str = "") -> PersonInfo:
    """A ``roster.persons`` row on the wire; ``prefix``: its columns' labels in a join (the key
    ring's ``p_``)."""
    col = row._mapping
    agents = col[f"{prefix}agents"]
    return PersonInfo(
        id=col[f"{prefix}id"],
        org=col[f"{prefix}org"],
        name=col[f"{prefix}name"],
        role=col[f"{prefix}role"],
        agents=None if agents is None else list(agents),
        production=col[f"{prefix}production"],
        operator=col[f"{prefix}operator"],
        disabled=col[f"{prefix}disabled"],
        created_at=col[f"{prefix}created_at"],
    )
