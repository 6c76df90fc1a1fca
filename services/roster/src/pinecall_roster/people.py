"""The roster's verbs of orgs, persons and keys over NATS (issue 21): what
``pinecall-runtime orgs|persons|keys`` asks, on ``<ns>.ops.people.<verb>``, with an operator
key (the registry's ``orgs:*``, ``persons:*``, ``keys:*``).

A person changed here (``persons-set``) or a key revoked (``keys-revoke``) is forgotten by this
replica's key ring, then said on NATS (``PersonChanged``, ``KeyRevoked``) so every replica of every
service forgets it at once (seed 000, "Three planes": "a person changed … at an endpoint is
forgotten on every gateway at once, said on the signal").
"""

from __future__ import annotations

import logging
from typing import Any

from pinecall_contracts.keys import KeyCreated, KeyInfo
from pinecall_contracts.persons import (
    KeyList,
    KeyListRequest,
    KeyRevokeRequest,
    OrgCreate,
    OrgInfo,
    OrgList,
    OrgListRequest,
    PersonChanged,
    PersonCreate,
    PersonInfo,
    PersonKeyCreate,
    PersonList,
    PersonListRequest,
    PersonSet,
)
from pinecall_roster.persons import Persons
from pinecall_roster.service import RosterService
from pinecall_servicekit.db import utcnow
from pinecall_servicekit.verbs import Verb

_log = logging.getLogger(__name__)


def people_verbs(service: RosterService) -> list[Verb[Any]]:
    """The verbs, one a line, for :func:`pinecall_roster.ops.start_ops`'s service."""
    persons = Persons(service.store.engine)
    subjects = service.bus.subjects

    async def orgs_create(request: OrgCreate, key: KeyInfo) -> OrgInfo:
        return await persons.create_org(request.name, request.environments, request.quotas)

    async def orgs_list(request: OrgListRequest, key: KeyInfo) -> OrgList:
        return OrgList(orgs=await persons.orgs())

    async def persons_create(request: PersonCreate, key: KeyInfo) -> PersonInfo:
        return await persons.create_person(
            request.org,
            request.name,
            request.role,
            agents=request.agents,
            production=request.production,
            operator=request.operator,
        )

    async def persons_list(request: PersonListRequest, key: KeyInfo) -> PersonList:
        return PersonList(persons=await persons.persons(request.org))

    async def persons_set(request: PersonSet, key: KeyInfo) -> PersonInfo:
        agents: Any = None if request.all_agents else request.agents
        if not request.all_agents and request.agents is None:
            agents = persons.UNCHANGED
        person = await persons.set_person(
            request.id,
            role=request.role,
            agents=agents,
            production=request.production,
            operator=request.operator,
            disabled=request.disabled,
        )
        service.keyring.forget_person(person.id)
        await service.bus.publish(subjects.person_changed, PersonChanged(id=person.id, at=utcnow()))
        _log.info("person %s changed by key %s", person.id, key.id)
        return person

    async def keys_create(request: PersonKeyCreate, key: KeyInfo) -> KeyCreated:
        if request.person is not None:
            return await persons.create_key(
                request.person, request.kind, request.name, request.environment
            )
        return await service.store.create_key(request.kind, request.name, request.environment)

    async def keys_list(request: KeyListRequest, key: KeyInfo) -> KeyList:
        keys = await service.store.keys()
        return KeyList(keys=[k for k in keys if request.person in (None, k.person)])

    async def keys_revoke(request: KeyRevokeRequest, key: KeyInfo) -> KeyInfo:
        return await service.revoke_key(request.id)

    return [
        Verb("orgs-create", subjects.ops_people("orgs-create"), OrgCreate, orgs_create),
        Verb("orgs-list", subjects.ops_people("orgs-list"), OrgListRequest, orgs_list),
        Verb("persons-create", subjects.ops_people("persons-create"), PersonCreate, persons_create),
        Verb("persons-list", subjects.ops_people("persons-list"), PersonListRequest, persons_list),
        Verb("persons-set", subjects.ops_people("persons-set"), PersonSet, persons_set),
        Verb("keys-create", subjects.ops_people("keys-create"), PersonKeyCreate, keys_create),
        Verb("keys-list", subjects.ops_people("keys-list"), KeyListRequest, keys_list),
        Verb("keys-revoke", subjects.ops_people("keys-revoke"), KeyRevokeRequest, keys_revoke),
    ]
