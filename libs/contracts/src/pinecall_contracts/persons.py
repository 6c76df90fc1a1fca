"""Orgs and persons on the wire (issue 21): who holds a key, and what they may do.

An org is a tenant: its name, the environments it may use, its quotas. A person is of one org and
holds keys of their own; the person's role, agents, production and operator flags and disabled
flag narrow what their keys' kind allows (``docs/roles.md`` is the table; the one check is
:mod:`pinecall_servicekit.policy`). A key with no person acts as its kind allows, as before
persons existed.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Final, Literal

import msgspec

from pinecall_contracts.base import Contract
from pinecall_contracts.ids import ORG_PATTERN, EnvironmentField
from pinecall_contracts.keys import KeyInfo

Role = Literal["viewer", "developer", "admin", "owner"]
"""What a person may do in their org, each role all the one before it may and more
(``docs/roles.md``): viewer reads; developer also builds and runs (agents, tokens, tools, evals);
admin also holds the org's numbers; owner also holds the org (its quotas)."""
ROLES: Final[tuple[Role, ...]] = ("viewer", "developer", "admin", "owner")
"""The roles, least first: a role may do all that the ones before it may."""
QuotaName = Literal["concurrent_calls"]
"""An org's quota: ``concurrent_calls``, the calls it may hold at once in each environment (the
dispatcher's token endpoint and written-call admission hold it; a quota the dispatcher has for the
org in one environment, ``POST /v1/ops/quotas``, overrides it there)."""
QUOTA_NAMES: Final[tuple[QuotaName, ...]] = ("concurrent_calls",)
"""Every quota an org may have: one registry (an unknown name is refused, never stored)."""
QuotaCount = Annotated[int, msgspec.Meta(ge=0, le=1_000_000)]
OrgName = Annotated[str, msgspec.Meta(pattern=ORG_PATTERN, examples=["org_acme"])]
PersonId = Annotated[
    str, msgspec.Meta(pattern=r"^[0-9a-f]{12}$(?![\s\S])", examples=["5e1f0a2b3c4d"])
]
PersonName = Annotated[str, msgspec.Meta(min_length=1, max_length=200, examples=["ada@acme.test"])]
AgentName = Annotated[str, msgspec.Meta(pattern=r"^[a-z0-9][a-z0-9_.-]{0,127}$(?![\s\S])")]


class OrgInfo(Contract, frozen=True, kw_only=True, tag="orgs.info.v1"):
    """An org: the environments its keys and persons may act in, and its quotas (a quota's name
    to its number, e.g. ``{"concurrent_calls": 20}``)."""

    name: OrgName
    environments: list[EnvironmentField]
    quotas: dict[str, int] = {}
    created_at: dt.datetime


class PersonInfo(Contract, frozen=True, kw_only=True, tag="persons.info.v1"):
    """A person of an org. ``agents`` None: every agent of the org; a list: only those.
    ``production``: may act in production. ``operator``: the platform's own staff, across orgs
    (the only persons whose keys may be operator keys). ``disabled``: refused everywhere."""

    id: PersonId
    org: OrgName
    name: PersonName
    role: Role
    agents: list[AgentName] | None = None
    production: bool = False
    operator: bool = False
    disabled: bool = False
    created_at: dt.datetime


class PersonChanged(Contract, frozen=True, kw_only=True, tag="persons.changed.v1"):
    """Said on NATS when a person is changed at an endpoint (role, agents, production, operator,
    disabled), so every replica forgets every key of theirs at once."""

    id: PersonId
    at: dt.datetime


class OrgCreate(Contract, frozen=True, kw_only=True, tag="orgs.create.v1"):
    """The roster's ``orgs-create`` verb: a new org."""

    name: OrgName
    environments: list[EnvironmentField]
    quotas: dict[QuotaName, QuotaCount] = {}


class OrgListRequest(Contract, frozen=True, kw_only=True, tag="orgs.list_request.v1"):
    """The roster's ``orgs-list`` verb."""


class OrgList(Contract, frozen=True, kw_only=True, tag="orgs.list.v1"):
    orgs: list[OrgInfo]


class PersonCreate(Contract, frozen=True, kw_only=True, tag="persons.create.v1"):
    """The roster's ``persons-create`` verb: a new person of ``org``."""

    org: OrgName
    name: PersonName
    role: Role
    agents: list[AgentName] | None = None
    production: bool = False
    operator: bool = False


class PersonListRequest(Contract, frozen=True, kw_only=True, tag="persons.list_request.v1"):
    """The roster's ``persons-list`` verb: every person, or ``org``'s."""

    org: OrgName | None = None


class PersonList(Contract, frozen=True, kw_only=True, tag="persons.list.v1"):
    persons: list[PersonInfo]


class PersonSet(Contract, frozen=True, kw_only=True, tag="persons.set.v1"):
    """The roster's ``persons-set`` verb: change what is given (None: unchanged; ``agents``
    given: only those; ``all_agents``: every agent). Said on NATS (:class:`PersonChanged`)."""

    id: PersonId
    role: Role | None = None
    agents: list[AgentName] | None = None
    all_agents: bool = False
    production: bool | None = None
    operator: bool | None = None
    disabled: bool | None = None


class PersonKeyCreate(Contract, frozen=True, kw_only=True, tag="persons.key_create.v1"):
    """The roster's ``keys-create`` verb: a key of ``kind``, a person's when ``person`` is
    given (an app key, or an operator person's operator key)."""

    kind: Literal["operator", "fleet", "app", "service"]
    name: PersonName
    environment: EnvironmentField | None = None
    person: PersonId | None = None


class KeyListRequest(Contract, frozen=True, kw_only=True, tag="persons.key_list_request.v1"):
    """The roster's ``keys-list`` verb: every key, or ``person``'s."""

    person: PersonId | None = None


class KeyList(Contract, frozen=True, kw_only=True, tag="persons.key_list.v1"):
    keys: list[KeyInfo]


class KeyRevokeRequest(Contract, frozen=True, kw_only=True, tag="persons.key_revoke.v1"):
    """The roster's ``keys-revoke`` verb: revoke ``id``, forgotten by every replica at once."""

    id: Annotated[str, msgspec.Meta(pattern=r"^[0-9a-f]{12}$(?![\s\S])")]
