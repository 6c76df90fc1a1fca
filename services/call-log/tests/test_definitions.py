"""An org's agents as data (issue 16, "Agents, as data"): put, read, listed, versioned; an
identical put writes nothing; concurrent puts never lose nor repeat a version; every refusal is a
problem detail and writes nothing."""

from __future__ import annotations

import asyncio
import copy
import hashlib
import json
from typing import Any

import pytest

from pinecall_clients.calllog import CallLogClient
from pinecall_clients.errors import AgentUnknown, CallLogRefused
from pinecall_contracts.agents import AgentDefinition
from pinecall_contracts.base import decode
from pinecall_testkit.call_log import Keys, Replica, bearer

PROBLEM = "application/problem+json"
AGENT = "/v1/agents/support-bot"
ACME = {"org": "org_acme"}


def definition(**changes: Any) -> dict[str, Any]:
    """A ``support-bot`` definition with a tool."""
    body: dict[str, Any] = {
        "name": "support-bot",
        "prompt": "You answer the phone for Acme's bistro. Be brief.",
        "greeting": "Acme's bistro, how can I help?",
        "voice": "sonic-english-female",
        "model": "claude-sonnet-4-5",
        "language": "en",
        "tools": [
            {
                "name": "book_slot",
                "description": "Book a table.",
                "parameters": {
                    "type": "object",
                    "properties": {"day": {"type": "string"}},
                    "required": ["day"],
                },
                "timeout_s": 8,
            }
        ],
        "max_call_seconds": 900,
    }
    return body | changes


async def test_a_put_is_version_1_and_reads_back_as_put(call_log: Replica, keys: Keys) -> None:
    app = bearer(keys.app)
    put = await call_log.put(AGENT, json=definition(), params=ACME, headers=app)
    assert put.status_code == 200, put.text
    stored = put.json()
    assert (stored["version"], stored["org"], stored["environment"]) == (
        1,
        "org_acme",
        "production",
    )
    prompt = definition()["prompt"].encode()
    assert stored["prompt_hash"] == hashlib.sha256(prompt).hexdigest()
    assert stored["definition"] == {"type": "agents.definition.v1", **definition()} | {
        "tools": [{"type": "agents.tool.v1", **definition()["tools"][0], "timeout_s": 8.0}],
        "record": False,  # issue 19: off unless the org says so
    }
    got = await call_log.get(AGENT, params=ACME, headers=app)
    assert got.json() == stored


async def test_a_change_is_a_new_version_and_the_old_one_stays_readable(
    call_log: Replica, keys: Keys
) -> None:
    app = bearer(keys.app)
    first = (await call_log.put(AGENT, json=definition(), params=ACME, headers=app)).json()
    second = await call_log.put(AGENT, json=definition(voice="alloy"), params=ACME, headers=app)
    assert second.json()["version"] == 2
    latest = (await call_log.get(AGENT, params=ACME, headers=app)).json()
    assert (latest["version"], latest["definition"]["voice"]) == (2, "alloy")
    old = await call_log.get(AGENT, params=ACME | {"version": 1}, headers=app)
    assert old.json() == first
    missing = await call_log.get(AGENT, params=ACME | {"version": 3}, headers=app)
    assert (missing.status_code, missing.headers["content-type"]) == (404, PROBLEM)


async def test_an_identical_put_answers_the_latest_and_writes_nothing(
    call_log: Replica, keys: Keys
) -> None:
    app = bearer(keys.app)
    first = (await call_log.put(AGENT, json=definition(), params=ACME, headers=app)).json()
    again = await call_log.put(AGENT, json=definition(), params=ACME, headers=app)
    assert again.json() == first  # the same version, the same updated_at
    store = call_log.app.state.call_log.store.definitions
    assert await store.count("org_acme", "production", "support-bot") == 1


async def test_concurrent_puts_make_one_version_each_none_lost_none_twice(
    call_log: Replica, keys: Keys
) -> None:
    """Ten different definitions put at once: versions 1 to 10, one each, as answered."""
    app = bearer(keys.app)
    bodies = [definition(prompt=f"Prompt {n}.") for n in range(10)]
    answers = await asyncio.gather(
        *[call_log.put(AGENT, json=b, params=ACME, headers=app) for b in bodies]
    )
    assert {a.status_code for a in answers} == {200}
    answered = {a.json()["version"]: a.json()["definition"]["prompt"] for a in answers}
    assert sorted(answered) == list(range(1, 11))
    for version, prompt in answered.items():
        stored = await call_log.get(AGENT, params=ACME | {"version": version}, headers=app)
        assert stored.json()["definition"]["prompt"] == prompt
    store = call_log.app.state.call_log.store.definitions
    assert await store.count("org_acme", "production", "support-bot") == 10


async def test_the_same_definition_put_at_once_is_one_version(
    call_log: Replica, keys: Keys
) -> None:
    app = bearer(keys.app)
    answers = await asyncio.gather(
        *[call_log.put(AGENT, json=definition(), params=ACME, headers=app) for _ in range(8)]
    )
    assert {(a.status_code, a.json()["version"]) for a in answers} == {(200, 1)}
    assert len({a.json()["updated_at"] for a in answers}) == 1
    store = call_log.app.state.call_log.store.definitions
    assert await store.count("org_acme", "production", "support-bot") == 1


async def test_two_concurrent_puts_of_two_definitions_are_versions_1_and_2(
    call_log: Replica, keys: Keys
) -> None:
    app = bearer(keys.app)
    a, b = await asyncio.gather(
        call_log.put(AGENT, json=definition(voice="a"), params=ACME, headers=app),
        call_log.put(AGENT, json=definition(voice="b"), params=ACME, headers=app),
    )
    assert sorted([a.json()["version"], b.json()["version"]]) == [1, 2]
    latest = (await call_log.get(AGENT, params=ACME, headers=app)).json()
    assert latest["version"] == 2


async def test_the_list_is_the_latest_of_each_agent_of_the_org_in_the_key_environment(
    call_log: Replica, keys: Keys
) -> None:
    app, sandbox = bearer(keys.app), bearer(keys.app_sandbox)
    await call_log.put(AGENT, json=definition(), params=ACME, headers=app)
    await call_log.put(AGENT, json=definition(voice="alloy"), params=ACME, headers=app)
    sales = definition(name="sales-bot", tools=[])
    await call_log.put("/v1/agents/sales-bot", json=sales, params=ACME, headers=app)
    await call_log.put(AGENT, json=definition(), params={"org": "org_other"}, headers=app)
    await call_log.put(AGENT, json=definition(prompt="Sandbox."), params=ACME, headers=sandbox)
    listed = (await call_log.get("/v1/agents", params=ACME, headers=app)).json()
    assert (listed["org"], listed["environment"]) == ("org_acme", "production")
    assert [(a["definition"]["name"], a["version"]) for a in listed["agents"]] == [
        ("sales-bot", 1),
        ("support-bot", 2),
    ]
    in_sandbox = (await call_log.get("/v1/agents", params=ACME, headers=sandbox)).json()
    assert [a["definition"]["prompt"] for a in in_sandbox["agents"]] == ["Sandbox."]
    none = (await call_log.get("/v1/agents", params={"org": "org_none"}, headers=app)).json()
    assert none["agents"] == []


async def test_an_operator_reads_and_puts_any_naming_org_and_environment(
    call_log: Replica, keys: Keys
) -> None:
    await call_log.put(AGENT, json=definition(), params=ACME, headers=bearer(keys.app_sandbox))
    operator = bearer(keys.operator)
    sandbox = ACME | {"environment": "sandbox"}
    got = (await call_log.get(AGENT, params=sandbox, headers=operator)).json()
    assert (got["environment"], got["version"]) == ("sandbox", 1)
    listed = (await call_log.get("/v1/agents", params=sandbox, headers=operator)).json()
    assert [a["version"] for a in listed["agents"]] == [1]
    put = await call_log.put(AGENT, json=definition(voice="x"), params=sandbox, headers=operator)
    assert put.json()["version"] == 2
    unnamed = await call_log.get(AGENT, params=ACME, headers=operator)
    assert unnamed.status_code == 422
    assert "environment" in unnamed.json()["detail"]


async def test_the_typed_client_puts_lists_and_shows(call_log: Replica, keys: Keys) -> None:
    async with CallLogClient("http://call-log.test", keys.app, transport=call_log.transport) as log:
        wanted = decode(json.dumps(definition()), AgentDefinition)
        stored = await log.put_agent(wanted, org="org_acme")
        assert (stored.version, stored.definition) == (1, wanted)
        assert (await log.agents(org="org_acme")).agents == [stored]
        assert await log.agent("support-bot", org="org_acme", version=1) == stored
        with pytest.raises(AgentUnknown):
            await log.agent("nobody", org="org_acme")
        with pytest.raises(CallLogRefused) as refused:
            await log.put_agent(AgentDefinition(name="x", prompt="p", max_call_seconds=0), org="o")
        assert refused.value.status == 422


async def test_what_runs_an_agents_calls_reads_it_in_the_agents_environment(
    call_log: Replica, keys: Keys
) -> None:
    """The overflow (its environment's fleet key) and the dispatcher (the service key, naming
    the environment) read one agent; each only where its key acts, and the org's scope holds."""
    await call_log.put(AGENT, json=definition(), params=ACME, headers=bearer(keys.app))
    sandbox = definition(voice="sandbox-voice")
    await call_log.put(AGENT, json=sandbox, params=ACME, headers=bearer(keys.app_sandbox))

    async def voice(key: str, **query: str) -> tuple[int, str | None]:
        r = await call_log.get(AGENT, params=ACME | query, headers=bearer(key))
        return r.status_code, r.json()["definition"]["voice"] if r.is_success else None

    assert await voice(keys.production) == (200, "sonic-english-female")
    assert await voice(keys.sandbox) == (200, "sandbox-voice")  # its own environment's
    assert await voice(keys.sandbox, environment="production") == (403, None)
    assert await voice(keys.service, environment="production") == (200, "sonic-english-female")
    assert await voice(keys.service, environment="sandbox") == (200, "sandbox-voice")
    assert await voice(keys.service, environment="mars") == (422, None)
    other = await call_log.get(AGENT, params={"org": "org_other"}, headers=bearer(keys.service))
    assert other.status_code == 422  # named no environment: 422 before any read
    other = await call_log.get(
        AGENT,
        params={"org": "org_other", "environment": "production"},
        headers=bearer(keys.service),
    )
    assert (other.status_code, other.json()["code"]) == (404, "not_found")  # another org's: none
    async with CallLogClient(
        "http://call-log.test", keys.service, transport=call_log.transport
    ) as log:
        got = await log.agent("support-bot", org="org_acme", environment="sandbox")
        assert (got.environment, got.definition.voice) == ("sandbox", "sandbox-voice")
        with pytest.raises(AgentUnknown):
            await log.agent("support-bot", org="org_other", environment="sandbox")


def _tool(**changes: Any) -> dict[str, Any]:
    tool: dict[str, Any] = copy.deepcopy(definition()["tools"][0])
    return tool | changes


TOO_LONG = "é" * 32_769  # 32 769 characters, 65 538 bytes as UTF-8
REFUSED: list[tuple[str, dict[str, Any], str]] = [
    # (name, the body put, the path of the rule broken)
    ("prompt over 64 KiB", definition(prompt=TOO_LONG), "$.prompt"),
    ("call limit over 30 min", definition(max_call_seconds=1801), "$.max_call_seconds"),
    ("call limit of 0 s", definition(max_call_seconds=0), "$.max_call_seconds"),
    ("tool timeout under 1 s", definition(tools=[_tool(timeout_s=0.5)]), "$.tools[0].timeout_s"),
    ("tool timeout over 120 s", definition(tools=[_tool(timeout_s=121)]), "$.tools[0].timeout_s"),
    ("duplicate tool", definition(tools=[_tool(), _tool(description="again")]), "$.tools[1].name"),
    ("the worker's end_call", definition(tools=[_tool(name="end_call")]), "$.tools[0].name"),
    (
        "parameters not a JSON Schema",
        definition(tools=[_tool(parameters={"type": "objekt"})]),
        "$.tools[0].parameters",
    ),
    (
        "parameters' required not a list",
        definition(tools=[_tool(parameters={"type": "object", "required": "day"})]),
        "$.tools[0].parameters",
    ),
    (
        "parameters not an object",
        definition(tools=[_tool(parameters={"type": "string"})]),
        "$.tools[0].parameters",
    ),
    ("name not the path's", definition(name="sales-bot"), "$.name"),
]


@pytest.mark.parametrize(("body", "path"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
async def test_a_definition_that_breaks_a_rule_is_422_naming_it_and_changes_nothing(
    call_log: Replica, keys: Keys, body: dict[str, Any], path: str
) -> None:
    app = bearer(keys.app)
    first = (await call_log.put(AGENT, json=definition(), params=ACME, headers=app)).json()
    refused = await call_log.put(AGENT, json=body, params=ACME, headers=app)
    assert (refused.status_code, refused.headers["content-type"]) == (422, PROBLEM), refused.text
    assert path in [e["path"] for e in refused.json()["errors"]]
    assert (await call_log.get(AGENT, params=ACME, headers=app)).json() == first


KEYS_REFUSED: list[tuple[str, str, str | None, dict[str, str], int]] = [
    # (name, method, key, query, status)
    ("put no key", "PUT", None, ACME, 401),
    ("put bad key", "PUT", "pck_000000000000_aaaaaaaaaaaaaaaaaaaaaaaa", ACME, 401),
    ("put fleet key", "PUT", "production", ACME, 403),
    ("put service key", "PUT", "service", ACME | {"environment": "production"}, 403),
    ("put app key of another environment", "PUT", "app", ACME | {"environment": "sandbox"}, 403),
    ("put no org", "PUT", "app", {}, 422),
    ("put operator naming no environment", "PUT", "operator", ACME, 422),
    ("get no key", "GET", None, ACME, 401),
    (
        "get fleet key of another environment",
        "GET",
        "sandbox",
        ACME | {"environment": "production"},
        403,
    ),
    (
        "get app key of another environment",
        "GET",
        "app_sandbox",
        ACME | {"environment": "production"},
        403,
    ),
    ("get service key naming no environment", "GET", "service", ACME, 422),
    ("get unknown agent", "GET", "app", {"org": "org_other"}, 404),
    ("get no org", "GET", "app", {}, 422),
    ("list fleet key", "LIST", "sandbox", ACME, 403),
    ("list service key", "LIST", "service", ACME | {"environment": "production"}, 403),
    ("list no key", "LIST", None, ACME, 401),
    ("list no org", "LIST", "app", {}, 422),
    # an org is 1-128 of A-Z a-z 0-9 _ . : - (a probe stored one with a newline)
    ("put org with a newline", "PUT", "app", {"org": "org\nacme"}, 400),
    ("list org with a slash", "LIST", "app", {"org": "org/acme"}, 400),
]


@pytest.mark.parametrize(
    ("method", "key", "query", "status"),
    [c[1:] for c in KEYS_REFUSED],
    ids=[c[0] for c in KEYS_REFUSED],
)
async def test_a_key_refused_or_a_scope_unnamed_is_a_problem_and_writes_nothing(
    call_log: Replica, keys: Keys, method: str, key: str | None, query: dict[str, str], status: int
) -> None:
    token = getattr(keys, key) if key in Keys.__struct_fields__ else key
    headers = bearer(token) if token else {}
    if method == "PUT":
        answer = await call_log.put(AGENT, json=definition(), params=query, headers=headers)
    elif method == "LIST":
        answer = await call_log.get("/v1/agents", params=query, headers=headers)
    else:
        await call_log.put(AGENT, json=definition(), params=ACME, headers=bearer(keys.app))
        answer = await call_log.get(AGENT, params=query, headers=headers)
    assert (answer.status_code, answer.headers["content-type"]) == (status, PROBLEM)
    operator = bearer(keys.operator)
    for environment in ("production", "sandbox"):
        for org in ("org_acme", "org_other"):
            listed = await call_log.get(
                "/v1/agents", params={"org": org, "environment": environment}, headers=operator
            )
            wanted = (
                1 if (method == "GET" and org == "org_acme" and environment == "production") else 0
            )
            assert len(listed.json()["agents"]) == wanted


@pytest.mark.parametrize(
    "body",
    [b'{"name": "support-bot", "prompt": ', {"name": "support-bot", "prompt": 7}, {"prompt": "p"}],
    ids=["malformed", "prompt a number", "no name"],
)
async def test_a_body_that_is_no_definition_is_400_and_writes_nothing(
    call_log: Replica, keys: Keys, body: Any
) -> None:
    app = bearer(keys.app)
    kwargs: dict[str, Any] = {"content": body} if isinstance(body, bytes) else {"json": body}
    answer = await call_log.put(AGENT, params=ACME, headers=app, **kwargs)
    assert (answer.status_code, answer.headers["content-type"]) == (400, PROBLEM)
    assert (await call_log.get("/v1/agents", params=ACME, headers=app)).json()["agents"] == []


async def test_the_openapi_documents_the_agents_routes_and_their_refusals(
    call_log: Replica,
) -> None:
    schema = (await call_log.get("/schema/openapi.json")).json()
    put = schema["paths"]["/v1/agents/{agent}"]["put"]["responses"]
    assert {"200", "400", "401", "403", "422", "503"} <= set(put)
    assert set(put["422"]["content"]) == {PROBLEM}
    assert "404" in schema["paths"]["/v1/agents/{agent}"]["get"]["responses"]
    assert "401" in schema["paths"]["/v1/agents"]["get"]["responses"]
