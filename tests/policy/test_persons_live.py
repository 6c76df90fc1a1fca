"""Orgs, persons and their keys against the real roster and call-log (issue 21): the roster's
verbs over NATS, the one policy on real routes, and a person changed at one replica forgotten by
every replica of every service at once (acceptance 2)."""

from __future__ import annotations

import contextlib

import pytest

from pinecall_call_log.service import CallLogService
from pinecall_contracts.keys import KeyCreated
from pinecall_contracts.persons import (
    KeyList,
    KeyListRequest,
    OrgCreate,
    OrgInfo,
    OrgList,
    OrgListRequest,
    PersonCreate,
    PersonInfo,
    PersonKeyCreate,
    PersonList,
    PersonListRequest,
    PersonSet,
)
from pinecall_servicekit.bus import Bus
from pinecall_servicekit.errors import Forbidden, NotFound, PinecallError, Unprocessable
from pinecall_testkit import call_log, roster
from pinecall_testkit.common import bearer, make_keys


def _agent(name: str) -> dict[str, object]:
    """A definition of agent ``name``."""
    return {"name": name, "prompt": "You book tables.", "greeting": "Hello.",
            "voice": "sonic-english-female", "model": "claude-sonnet-4-5", "language": "en"}  # fmt: skip


async def _ask(bus: Bus, verb: str, message: object, reply: type, key: str) -> object:
    return await bus.request(bus.subjects.ops_people(verb), message, reply, headers=bearer(key))  # type: ignore[arg-type]


@pytest.fixture
async def platform(database_url: str, nats_url: str, nats_namespace: str):  # type: ignore[no-untyped-def]
    """Two roster replicas and two call-log replicas, and the keys of ``make_keys``."""
    keys = await make_keys(database_url)
    async with contextlib.AsyncExitStack() as stack:
        replicas = [
            await stack.enter_async_context(
                module.replica_on(database_url, nats_url, nats_namespace)
            )
            for module in (roster, roster, call_log, call_log)
        ]
        yield keys, replicas


async def _person(
    bus: Bus, operator: str, role: str, **fields: object
) -> tuple[PersonInfo, KeyCreated]:
    """A person of org_acme with an app key of production."""
    person = await _ask(bus, "persons-create", PersonCreate(
        org="org_acme", name=f"{role}-{len(fields)}-{sorted(fields)}", role=role, **fields),  # type: ignore[arg-type]
        PersonInfo, operator)  # fmt: skip
    assert isinstance(person, PersonInfo)
    made = await _ask(bus, "keys-create", PersonKeyCreate(
        kind="app", name=f"{person.name}'s", environment="production", person=person.id),
        KeyCreated, operator)  # fmt: skip
    assert isinstance(made, KeyCreated)
    assert made.key.person == person.id
    return person, made


async def test_orgs_persons_and_their_keys_over_the_roster_verbs(platform) -> None:  # type: ignore[no-untyped-def]
    keys, (roster_a, *_) = platform
    bus: Bus = roster_a.app.state.roster.bus
    org = await _ask(bus, "orgs-create", OrgCreate(name="org_acme", environments=["production"]),
                     OrgInfo, keys.operator)  # fmt: skip
    assert isinstance(org, OrgInfo)
    assert org.environments == ["production"]
    listed = await _ask(bus, "orgs-list", OrgListRequest(), OrgList, keys.operator)
    assert isinstance(listed, OrgList)
    assert [o.name for o in listed.orgs] == ["org_acme"]
    person, _ = await _person(bus, keys.operator, "viewer", production=True)
    persons = await _ask(bus, "persons-list", PersonListRequest(org="org_acme"), PersonList,
                         keys.operator)  # fmt: skip
    assert isinstance(persons, PersonList)
    assert [p.id for p in persons.persons] == [person.id]
    theirs = await _ask(bus, "keys-list", KeyListRequest(person=person.id), KeyList, keys.operator)
    assert isinstance(theirs, KeyList)
    assert [k.person for k in theirs.keys] == [person.id]
    # bad input: named, nothing written
    with pytest.raises(Unprocessable, match="org org_acme may not use sandbox"):
        await _ask(bus, "keys-create", PersonKeyCreate(kind="app", name="x", environment="sandbox",
                                                       person=person.id), KeyCreated, keys.operator)  # fmt: skip
    with pytest.raises(Unprocessable, match="not an operator: no operator key"):
        await _ask(bus, "keys-create", PersonKeyCreate(kind="operator", name="x", person=person.id),
                   KeyCreated, keys.operator)  # fmt: skip
    with pytest.raises(Unprocessable, match="app or operator keys, not fleet keys"):
        await _ask(bus, "keys-create", PersonKeyCreate(kind="fleet", name="x", environment="production",
                                                       person=person.id), KeyCreated, keys.operator)  # fmt: skip
    with pytest.raises(NotFound, match="no org org_none"):
        await _ask(bus, "persons-create", PersonCreate(org="org_none", name="x", role="viewer"),
                   PersonInfo, keys.operator)  # fmt: skip
    with pytest.raises(Forbidden, match="an app key cannot do this"):
        await _ask(bus, "orgs-list", OrgListRequest(), OrgList, keys.app)


async def test_the_policy_on_real_routes_by_role_production_and_agents(platform) -> None:  # type: ignore[no-untyped-def]
    keys, (roster_a, _, log_a, _) = platform
    bus: Bus = roster_a.app.state.roster.bus
    await _ask(bus, "orgs-create", OrgCreate(name="org_acme", environments=["production", "sandbox"]),
               OrgInfo, keys.operator)  # fmt: skip
    viewer = (await _person(bus, keys.operator, "viewer", production=True))[1].secret
    developer = (await _person(bus, keys.operator, "developer", production=True,
                               agents=["booking"]))[1].secret  # fmt: skip
    sandboxed = (await _person(bus, keys.operator, "owner"))[1].secret
    put = "/v1/agents/booking?org=org_acme"
    refused = await log_a.put(put, json=_agent("booking"), headers=bearer(viewer))
    assert refused.status_code == 403
    assert (
        refused.json()["detail"]
        == "a viewer may not put an agent's definition (needs developer or above)"
    )
    assert refused.json()["errors"][0]["permission"] == "agents:write"
    assert (
        await log_a.put(put, json=_agent("booking"), headers=bearer(developer))
    ).status_code == 200
    assert (await log_a.get(put, headers=bearer(viewer))).status_code == 200
    other = await log_a.put(
        "/v1/agents/sales?org=org_acme", json=_agent("sales"), headers=bearer(developer)
    )
    assert other.json()["detail"].endswith("may not touch agent sales")
    other_org = await log_a.get("/v1/agents?org=org_other", headers=bearer(viewer))
    assert other_org.json()["detail"].endswith("is of org_acme, not of org_other")
    production = await log_a.get("/v1/agents?org=org_acme", headers=bearer(sandboxed))
    assert production.status_code == 403
    assert production.json()["detail"].endswith("has no production access")
    # a key of no person acts as its kind allows, as before persons
    assert (await log_a.get("/v1/agents?org=org_acme", headers=bearer(keys.app))).status_code == 200


async def test_a_person_disabled_at_roster_a_is_refused_at_call_log_b_at_once(platform) -> None:  # type: ignore[no-untyped-def]
    """Acceptance 2: the wait is on call-log B's own notice (its key ring's ``changes``), never a
    sleep; B remembered the key (its 5 s cache), so only the signal can make it refuse."""
    keys, (roster_a, _, _, log_b) = platform
    bus: Bus = roster_a.app.state.roster.bus
    await _ask(bus, "orgs-create", OrgCreate(name="org_acme", environments=["production"]),
               OrgInfo, keys.operator)  # fmt: skip
    person, made = await _person(bus, keys.operator, "developer", production=True)
    key = made.secret
    url = "/v1/agents?org=org_acme"
    assert (await log_b.get(url, headers=bearer(key))).status_code == 200
    ring = log_b.app.state.call_log.keyring
    assert isinstance(log_b.app.state.call_log, CallLogService)
    assert ring.remembers(made.key.id)  # B would answer from its cache for 5 s more
    heard = ring.forgotten
    await _ask(
        bus, "persons-set", PersonSet(id=person.id, disabled=True), PersonInfo, keys.operator
    )
    await ring.changes.wait_for(lambda: ring.forgotten > heard, timeout=1.0)
    refused = await log_b.get(url, headers=bearer(key))
    assert refused.status_code == 403
    assert refused.json()["detail"] == f"person {person.id} is disabled"
    # back: enabled and a viewer now; the change is heard the same way
    heard = ring.forgotten
    await _ask(bus, "persons-set", PersonSet(id=person.id, disabled=False, role="viewer"),
               PersonInfo, keys.operator)  # fmt: skip
    await ring.changes.wait_for(lambda: ring.forgotten > heard, timeout=1.0)
    assert (await log_b.get(url, headers=bearer(key))).status_code == 200
    put = await log_b.put(
        "/v1/agents/booking?org=org_acme", json=_agent("booking"), headers=bearer(key)
    )
    assert put.status_code == 403


async def test_a_bad_person_change_is_refused_and_nothing_is_said(platform) -> None:  # type: ignore[no-untyped-def]
    keys, (roster_a, *_) = platform
    bus: Bus = roster_a.app.state.roster.bus
    with pytest.raises(NotFound, match="no person 000000000000"):
        await _ask(bus, "persons-set", PersonSet(id="000000000000", disabled=True), PersonInfo,
                   keys.operator)  # fmt: skip
    with pytest.raises(PinecallError):
        await _ask(bus, "persons-set", PersonSet(id="000000000000"), PersonInfo, keys.operator)


async def test_a_persons_key_acts_for_its_org_and_agents_whichever_part_names_them(  # type: ignore[no-untyped-def]
    platform, database_url: str, nats_url: str, nats_namespace: str
) -> None:
    """The org and agent a request's body names are checked as those of its query and path
    (the probe of this stop minted tokens, placed an outbound call and ran an eval for another
    org's agent with a developer's key that ``?org=`` refused)."""
    from pinecall_testkit.common import running_at
    from pinecall_testkit.dispatcher import dispatcher_app

    keys, (roster_a, *_) = platform
    bus: Bus = roster_a.app.state.roster.bus
    await _ask(bus, "orgs-create", OrgCreate(name="org_acme", environments=["production"]),
               OrgInfo, keys.operator)  # fmt: skip
    developer = (await _person(bus, keys.operator, "developer", production=True,
                               agents=["booking"]))[1].secret  # fmt: skip
    app = dispatcher_app(database_url, nats_url, nats_namespace,
                         call_log_url="http://127.0.0.1:1", service_key=keys.service)  # fmt: skip
    asks = [
        ("/v1/tokens", {"agent": "booking", "org": "org_other"}, "not of org_other"),
        ("/v1/tokens", {"agent": "sales", "org": "org_acme"}, "may not touch agent sales"),
        ("/v1/calls/outbound", {"agent": "booking", "org": "org_other", "to": "+15005550006"},
         "not of org_other"),
        ("/v1/evals/voice", {"agent": "sales", "org": "org_acme", "script": ["Hi."]},
         "may not touch agent sales"),
    ]  # fmt: skip
    async with running_at("http://dispatcher.test")(app) as dispatcher:
        for path, body, why in asks:
            r = await dispatcher.post(path, json=body, headers=bearer(developer))
            assert r.status_code == 403, (path, body, r.text)
            assert r.headers["content-type"].startswith("application/problem+json")
            assert r.json()["detail"].endswith(why), (path, r.json())
        blank = await dispatcher.post(
            "/v1/evals/voice", json={"agent": "booking", "script": ["   "]},
            headers=bearer(developer),
        )  # fmt: skip
        assert blank.status_code == 400, blank.text
        short = await dispatcher.post(
            "/v1/calls/outbound", json={"agent": "booking", "to": "+12"},
            headers=bearer(developer),
        )  # fmt: skip
        assert short.status_code == 400, short.text
