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

Role = Literal["viewer", "developer", "admin", "owner"]
"""What a person may do in their org, each role all the one before it may and more
(``docs/roles.md``): viewer reads; developer also builds and runs (agents, tokens, tools, evals);
admin also holds the org's numbers; owner also holds the org (its quotas)."""
ROLES: Final[tuple[Role, ...]] = ("viewer", "developer", "admin", "owner")
"""The roles, least first: a role may do all that the ones before it may."""
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
