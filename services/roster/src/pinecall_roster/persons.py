"""The roster's orgs and persons (``roster.orgs``, ``roster.persons``; issue 21), and a person's
keys. The tables are defined in :mod:`pinecall_servicekit.persons` (every key ring reads them) and
migrated here (``0003_orgs_and_persons``).

A person's key is an app key (of one environment their org may use) or, for an operator person
only, an operator key; fleet and service keys are never a person's. Bad input is
``Unprocessable`` (422) naming what is wrong, an unknown org or person ``NotFound``, a name taken
``Conflict``; nothing is half-written.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from pinecall_contracts.ids import ENVIRONMENTS
from pinecall_contracts.keys import KeyCreated, KeyKind
from pinecall_contracts.persons import QUOTA_NAMES, ROLES, OrgInfo, PersonInfo, QuotaName, Role
from pinecall_roster.store import Store
from pinecall_servicekit import db
from pinecall_servicekit.errors import Conflict, NotFound, Unprocessable
from pinecall_servicekit.persons import ORGS, PERSONS, org_info, person_info

PERSON_KINDS: tuple[KeyKind, ...] = ("app", "operator")
"""The kinds of key a person may hold (operator: an operator person only)."""
UNCHANGED: Any = object()
"""``set_person(agents=UNCHANGED)``: leave the person's agents as they are."""


class Persons:
    """Orgs, persons and persons' keys in the roster's database."""

    UNCHANGED = UNCHANGED

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def create_org(
        self, name: str, environments: Sequence[str], quotas: Mapping[QuotaName, int] | None = None
    ) -> OrgInfo:
        """A new org that may use ``environments`` (``Conflict`` when the name is taken;
        ``Unprocessable`` for a quota not in ``QUOTA_NAMES`` or below 0)."""
        if not environments or set(environments) - set(ENVIRONMENTS):
            raise Unprocessable(f"an org's environments are some of {', '.join(ENVIRONMENTS)}")
        unknown = sorted(set(quotas or {}) - set(QUOTA_NAMES))
        if unknown:
            raise Unprocessable(f"no quota {unknown[0]!r}: it is {', '.join(QUOTA_NAMES)}")
        if any(v < 0 for v in (quotas or {}).values()):
            raise Unprocessable("a quota is a count: 0 or more")
        org = OrgInfo(
            name=name,
            environments=sorted(set(environments)),
            quotas={str(name): count for name, count in (quotas or {}).items()},
            created_at=db.utcnow(),
        )
        async with db.translate_errors("creating an org"), self.engine.begin() as conn:
            found = await conn.execute(sa.select(ORGS.c.name).where(ORGS.c.name == name))
            if found.first() is not None:
                raise Conflict(f"org {name} exists")
            await conn.execute(sa.insert(ORGS).values(**_fields(org)))
        return org

    async def orgs(self) -> list[OrgInfo]:
        async with db.translate_errors("listing orgs"), self.engine.connect() as conn:
            rows = (await conn.execute(sa.select(ORGS).order_by(ORGS.c.name))).all()
        return [org_info(r) for r in rows]

    async def create_person(
        self,
        org: str,
        name: str,
        role: Role,
        *,
        agents: Sequence[str] | None = None,
        production: bool = False,
        operator: bool = False,
    ) -> PersonInfo:
        """A new person of ``org`` (``NotFound`` for no such org, ``Conflict`` for a name the org
        has already)."""
        _check_role(role)
        person = PersonInfo(
            id=secrets.token_hex(6),
            org=org,
            name=name,
            role=role,
            agents=None if agents is None else list(agents),
            production=production,
            operator=operator,
            created_at=db.utcnow(),
        )
        async with db.translate_errors("creating a person"), self.engine.begin() as conn:
            if (
                await conn.execute(sa.select(ORGS.c.name).where(ORGS.c.name == org))
            ).first() is None:
                raise NotFound(f"no org {org}")
            taken = sa.select(PERSONS.c.id).where(PERSONS.c.org == org, PERSONS.c.name == name)
            if (await conn.execute(taken)).first() is not None:
                raise Conflict(f"org {org} has a person {name} already")
            await conn.execute(sa.insert(PERSONS).values(**_fields(person)))
        return person

    async def persons(self, org: str | None = None) -> list[PersonInfo]:
        query = sa.select(PERSONS).order_by(PERSONS.c.org, PERSONS.c.name)
        if org is not None:
            query = query.where(PERSONS.c.org == org)
        async with db.translate_errors("listing persons"), self.engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [person_info(r) for r in rows]

    async def person(self, person_id: str) -> PersonInfo:
        async with db.translate_errors("reading a person"), self.engine.connect() as conn:
            row = (await conn.execute(sa.select(PERSONS).where(PERSONS.c.id == person_id))).first()
        if row is None:
            raise NotFound(f"no person {person_id}")
        return person_info(row)

    async def set_person(
        self,
        person_id: str,
        *,
        role: Role | None = None,
        agents: Sequence[str] | None = UNCHANGED,
        production: bool | None = None,
        operator: bool | None = None,
        disabled: bool | None = None,
    ) -> PersonInfo:
        """Change what is given of the person (``agents=None``: every agent); the person as it
        stands. Whoever calls this says the change on NATS (``PersonChanged``), so every key ring
        forgets the person's keys at once."""
        values: dict[str, Any] = {}
        if role is not None:
            _check_role(role)
            values["role"] = role
        if agents is not UNCHANGED:
            values["agents"] = None if agents is None else list(agents)
        for name, value in (("production", production), ("operator", operator),
                            ("disabled", disabled)):  # fmt: skip
            if value is not None:
                values[name] = value
        if not values:
            raise Unprocessable("nothing to change: give a role, agents, production or disabled")
        async with db.translate_errors("changing a person"), self.engine.begin() as conn:
            done = await conn.execute(
                sa.update(PERSONS).where(PERSONS.c.id == person_id).values(**values)
            )
            if done.rowcount == 0:
                raise NotFound(f"no person {person_id}")
        return await self.person(person_id)

    async def create_key(
        self, person_id: str, kind: KeyKind, name: str, environment: str | None
    ) -> KeyCreated:
        """A new key of the person: an app key of an environment their org may use, or an
        operator key of an operator person (``Unprocessable`` otherwise, and for a disabled
        person, who is refused everywhere and so holds no new key)."""
        person = await self.person(person_id)
        if person.disabled:
            raise Unprocessable(f"person {person_id} is disabled: no new key")
        if kind not in PERSON_KINDS:
            raise Unprocessable(f"a person holds app or operator keys, not {kind} keys")
        if kind == "operator" and not person.operator:
            raise Unprocessable(f"person {person_id} is not an operator: no operator key")
        if kind == "app" and environment is None:
            raise Unprocessable(f"an app key needs an environment: {' or '.join(ENVIRONMENTS)}")
        if kind == "app":
            orgs = {o.name: o for o in await self.orgs()}
            if environment not in orgs[person.org].environments:
                raise Unprocessable(f"org {person.org} may not use {environment}")
        return await Store(self.engine).create_key(kind, name, environment, person=person_id)


def _check_role(role: str) -> None:
    if role not in ROLES:
        raise Unprocessable(f"no role {role!r}: it is {', '.join(ROLES)}")


def _fields(row: OrgInfo | PersonInfo) -> dict[str, Any]:
    return {f: getattr(row, f) for f in row.__struct_fields__}
