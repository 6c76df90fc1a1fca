"""``pinecall-runtime orgs create|list`` and ``persons create|list|set`` (issue 21): the roster's
people verbs (:mod:`pinecall_roster.people`) over NATS with the operator key, like ``fleet``.

Bad input is a click usage error naming the option (exit 2) before anything is asked; what the
roster refuses is ``error [code]: detail`` (:func:`pinecall_servicekit.operator.run`).
``keys create --person`` (in :mod:`pinecall_roster.commands`) asks the same way.
"""

from __future__ import annotations

import re
from typing import TypeVar, get_args

import click
import msgspec

from pinecall_contracts.base import Contract, to_builtins
from pinecall_contracts.ids import ENVIRONMENTS
from pinecall_contracts.persons import (
    QUOTA_NAMES,
    OrgCreate,
    OrgInfo,
    OrgList,
    OrgListRequest,
    PersonCreate,
    PersonInfo,
    PersonList,
    PersonListRequest,
    PersonSet,
    Role,
)
from pinecall_servicekit.bus import Bus
from pinecall_servicekit.operator import CommandError, OperatorSettings, run, table

R = TypeVar("R", bound=Contract)
_QUOTA = re.compile(r"^([a-z_]{1,64})=(\d{1,9})$")
_AGENT = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,127}$")


async def ask(verb: str, message: Contract, reply: type[R]) -> R:
    """The roster's answer to ``verb`` (``<ns>.ops.people.<verb>``), asked with the operator key."""
    settings = OperatorSettings.load()
    if not settings.operator_key:
        raise CommandError(
            "unauthorized",
            "no operator key: set PINECALL_OPERATOR_KEY, or run ./dev up "
            f"(while it runs, {settings.state_dir}/up.json names one)",
        )
    bus = await Bus.connect(settings.nats_url, settings.nats_namespace, name="cli")
    try:
        return await bus.request(
            bus.subjects.ops_people(verb),
            message,
            reply,
            headers={"Authorization": f"Bearer {settings.operator_key}"},
        )
    finally:
        await bus.close()


def _quotas(_: click.Context, __: click.Parameter, values: tuple[str, ...]) -> dict[str, int]:
    quotas: dict[str, int] = {}
    for value in values:
        match = _QUOTA.match(value)
        if not match:
            raise click.BadParameter(f"{value!r} is not NAME=COUNT (e.g. concurrent_calls=20)")
        if match[1] not in QUOTA_NAMES:
            raise click.BadParameter(f"no quota {match[1]!r}: it is {', '.join(QUOTA_NAMES)}")
        quotas[match[1]] = int(match[2])
    return quotas


def _agents(_: click.Context, __: click.Parameter, value: str | None) -> list[str] | None:
    if value is None:
        return None
    agents = [a.strip() for a in value.split(",")]
    if bad := [a for a in agents if not _AGENT.match(a)]:
        raise click.BadParameter(f"not an agent's name: {', '.join(map(repr, bad))}")
    return agents


def _echo_json(value: Contract) -> None:
    click.echo(msgspec.json.encode(to_builtins(value)).decode())


@click.group()
def orgs() -> None:
    """Orgs: the tenants, the environments each may use, their quotas."""


@orgs.command(name="create")
@click.argument("name")
@click.option("--environment", "environments", multiple=True, required=True,
              type=click.Choice(ENVIRONMENTS), help="An environment it may use (repeat).")  # fmt: skip
@click.option("--quota", "quotas", multiple=True, callback=_quotas, help="NAME=COUNT (repeat).")
@run
async def orgs_create(name: str, environments: tuple[str, ...], quotas: dict[str, int]) -> None:
    """Make the org NAME."""
    try:
        request = msgspec.convert(
            {"name": name, "environments": list(environments), "quotas": quotas}, OrgCreate
        )
    except msgspec.ValidationError as exc:
        raise click.BadParameter(str(exc), param_hint="NAME") from exc
    org = await ask("orgs-create", request, OrgInfo)
    click.echo(f"{org.name}: made ({', '.join(org.environments)})")


@orgs.command(name="list")
@click.option("--json", "as_json", is_flag=True, help="JSON for scripts.")
@run
async def orgs_list(as_json: bool) -> None:
    """Every org."""
    listed = await ask("orgs-list", OrgListRequest(), OrgList)
    if as_json:
        _echo_json(listed)
        return
    rows = [(o.name, ",".join(o.environments),
             ",".join(f"{k}={v}" for k, v in sorted(o.quotas.items()))) for o in listed.orgs]  # fmt: skip
    click.echo(table(("org", "environments", "quotas"), rows))


@click.group()
def persons() -> None:
    """Persons: who holds keys, their role, agents, production access, operator, disabled."""


@persons.command(name="create")
@click.option("--org", required=True)
@click.option("--name", required=True, help="Who: an e-mail, a name.")
@click.option("--role", required=True, type=click.Choice(get_args(Role)))
@click.option(
    "--agents", callback=_agents, help="Only these agents, comma-separated (default: all)."
)
@click.option("--production/--no-production", default=False, help="May act in production.")
@click.option("--operator", is_flag=True, help="The platform's own staff, across orgs.")
@run
async def persons_create(
    org: str, name: str, role: Role, agents: list[str] | None, production: bool, operator: bool
) -> None:
    """Make a person of ORG; prints their id."""
    try:
        request = msgspec.convert(
            {"org": org, "name": name, "role": role, "agents": agents,
             "production": production, "operator": operator},
            PersonCreate,
        )  # fmt: skip
    except msgspec.ValidationError as exc:
        raise click.BadParameter(str(exc)) from exc
    person = await ask("persons-create", request, PersonInfo)
    click.echo(person.id)


@persons.command(name="list")
@click.option("--org", default=None, help="Only this org's.")
@click.option("--json", "as_json", is_flag=True, help="JSON for scripts.")
@run
async def persons_list(org: str | None, as_json: bool) -> None:
    """Every person (or ORG's)."""
    listed = await ask("persons-list", PersonListRequest(org=org), PersonList)
    if as_json:
        _echo_json(listed)
        return
    rows = [(p.id, p.org, p.name, p.role, "all" if p.agents is None else ",".join(p.agents),
             "yes" if p.production else "no", "yes" if p.operator else "no",
             "yes" if p.disabled else "no") for p in listed.persons]  # fmt: skip
    heads = ("id", "org", "name", "role", "agents", "production", "operator", "disabled")
    click.echo(table(heads, rows))


@persons.command(name="set")
@click.argument("person")
@click.option("--role", type=click.Choice(get_args(Role)), default=None)
@click.option("--agents", callback=_agents, help="Only these agents, comma-separated.")
@click.option("--all-agents", is_flag=True, help="Every agent of the org.")
@click.option("--production/--no-production", default=None)
@click.option("--operator/--no-operator", default=None)
@click.option("--disabled/--enabled", default=None)
@run
async def persons_set(
    person: str,
    role: Role | None,
    agents: list[str] | None,
    all_agents: bool,
    production: bool | None,
    operator: bool | None,
    disabled: bool | None,
) -> None:
    """Change PERSON; every replica of every service forgets their keys at once."""
    if agents is not None and all_agents:
        raise click.UsageError("give --agents or --all-agents, not both")
    if (role, agents, production, operator, disabled) == (None,) * 5 and not all_agents:
        raise click.UsageError(
            "nothing to change: give --role, --agents, --all-agents, --production, --operator "
            "or --disabled"
        )
    try:
        request = msgspec.convert(
            {"id": person, "role": role, "agents": agents, "all_agents": all_agents,
             "production": production, "operator": operator, "disabled": disabled},
            PersonSet,
        )  # fmt: skip
    except msgspec.ValidationError as exc:
        raise click.BadParameter(str(exc), param_hint="PERSON") from exc
    changed = await ask("persons-set", request, PersonInfo)
    state = "disabled" if changed.disabled else changed.role
    click.echo(f"{changed.id}: {state}")
