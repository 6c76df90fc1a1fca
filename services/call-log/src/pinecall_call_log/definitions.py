"""The agents' definitions on HTTP (issue 16, "Agents, as data"), beside :mod:`.api`'s routes.

=====================================  ==================  =======================================
route                                  key                 answer
=====================================  ==================  =======================================
PUT /v1/agents/{agent}?org=            app, operator       AgentVersion (AgentDefinition;
                                                           idempotent)
GET /v1/agents?org=                    app, operator       AgentList (the latest version of each)
GET /v1/agents/{agent}?org=&version=   all four            AgentVersion (the latest, or
                                                           ``version``)
=====================================  ==================  =======================================

An agent is an org's in one environment. An app or fleet key acts in its own environment
(another named with ``?environment=`` is 403); an operator or service key names it (422 when it
does not). Keys carry no org today, so every request names the org, ``?org=`` (422 when it does
not): an app key of an environment is trusted for its orgs, as at the token endpoint, where a
``TokenRequest`` names whose quota a call counts against.

Who reads one agent besides its org: the dispatcher (its service key: whether a ring's agent
exists, at the token endpoint and when a phone rings) and the overflow (its environment's fleet
key: the agent's voice for its sentence); an operator reads any. A fleet or service key puts
nothing and lists nothing (403): they ask for the agent a call names, never for an org's list.

A put stores the definition as the agent's next version unless it is the latest's (an identical
put answers the latest and writes nothing). A definition that breaks a rule
(:func:`pinecall_call_log.domain.definition_refusals`) is a 422 naming each rule broken in
``errors``, and nothing is written; a body that is not a definition (a wrong type) is a 400.
"""

from __future__ import annotations

from typing import Annotated

from litestar import get, put
from litestar.params import FromQuery, JSONBody, QueryParameter

from pinecall_call_log import domain
from pinecall_call_log.access import AgentPath, AnyRequest, environment_named, key_of, service_of
from pinecall_contracts.agents import AgentDefinition, AgentList, AgentVersion
from pinecall_contracts.ids import ORG_PATTERN
from pinecall_contracts.keys import KeyInfo
from pinecall_servicekit.db import utcnow
from pinecall_servicekit.errors import NotFound, Unprocessable
from pinecall_servicekit.http import problems

OrgQuery = Annotated[str | None, QueryParameter(pattern=ORG_PATTERN)]
VersionQuery = Annotated[int | None, QueryParameter(ge=1, le=2**31 - 1)]


def _scope(key: KeyInfo, org: str | None, environment: str | None) -> tuple[str, str]:
    """The org and environment a request acts for: ``Unprocessable`` for no ``?org=`` (or an
    operator's missing ``?environment=``), ``Forbidden`` for an app key naming another
    environment than its own."""
    env = environment_named(key, environment, "an agent")
    if org is None:
        raise Unprocessable(
            "name the agent's org: ?org=<org> (a key carries no org)",
            errors=[{"message": "required", "key": "org", "source": "query"}],
        )
    return org, env


@put("/v1/agents/{agent:str}", status_code=200, responses=problems(400, 401, 403, 422, 503))
async def put_agent(
    request: AnyRequest,
    agent: AgentPath,
    data: JSONBody[AgentDefinition],
    org: OrgQuery = None,
    environment: FromQuery[str | None] = None,
) -> AgentVersion:
    """Store the agent's whole definition as its next version (the latest, unwritten, when the
    definition is the latest's); answers the version that stands."""
    org_, env = _scope(await key_of(request), org, environment)
    if errors := domain.definition_refusals(data, agent):
        detail = "; ".join(f"{e['path']}: {e['message']}" for e in errors)
        raise Unprocessable(f"agent {agent} not stored: {detail}", errors=errors)
    store = service_of(request).store.definitions
    version, _ = await store.put(org_, env, data, domain.prompt_hash(data.prompt), utcnow())
    return version


@get("/v1/agents", responses=problems(400, 401, 403, 422, 503))
async def list_agents(
    request: AnyRequest, org: OrgQuery = None, environment: FromQuery[str | None] = None
) -> AgentList:
    """The latest version of each of the org's agents in the environment, by name."""
    org_, env = _scope(await key_of(request), org, environment)
    agents = await service_of(request).store.definitions.latest(org_, env)
    return AgentList(org=org_, environment=env, agents=agents)


@get("/v1/agents/{agent:str}", responses=problems(400, 401, 403, 404, 422, 503))
async def show_agent(
    request: AnyRequest,
    agent: AgentPath,
    org: OrgQuery = None,
    environment: FromQuery[str | None] = None,
    version: VersionQuery = None,
) -> AgentVersion:
    """The agent's latest version, or ``?version=N``; 404 when there is no such agent or
    version. Any key kind reads it (``agents:read``), each in its own scope."""
    org_, env = _scope(await key_of(request), org, environment)
    found = await service_of(request).store.definitions.get(org_, env, agent, version)
    if found is None:
        which = f"version {version} of agent" if version is not None else "agent"
        raise NotFound(f"no {which} {agent} of {org_} in {env}")
    return found


ROUTES = [put_agent, list_agents, show_agent]
