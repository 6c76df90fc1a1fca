"""``pinecall-runtime agents put FILE | list | show NAME``: an org's agents on call-log.

Over call-log's HTTP (``PUT/GET /v1/agents``, :mod:`pinecall_clients.calllog`) at
``PINECALL_CALL_LOG_URL`` (``up.json`` names the one ``./dev up`` runs). The key is the operator's
(``PINECALL_OPERATOR_KEY`` or ``up.json``), as for every other command of this CLI, naming the
org (``--org``) and the environment (``--environment``, production by default); ``--key`` takes an
org's app key instead, which acts in its own environment. ``show`` prints the definition as YAML,
so what it prints can be edited and put back.

Errors are named, with the exit codes of the others: a file that is no definition and a
definition call-log refuses (each rule broken said) exit 1, an agent unknown 5, call-log not
answering 69, the settings 78.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import msgspec
import yaml

from pinecall_clients.calllog import CallLogClient
from pinecall_clients.errors import CallLogRefused, CallLogUnavailable
from pinecall_contracts.agents import AgentDefinition, AgentTool, AgentVersion
from pinecall_contracts.ids import AGENT_PATTERN, ENVIRONMENTS, ORG_PATTERN
from pinecall_servicekit.lifecycle import ExitCode
from pinecall_servicekit.operator import CommandError, OperatorSettings, run, table, where_from

WITHIN_S = 5.0
"""How long a command retries while call-log does not answer (seconds)."""


class Scope(msgspec.Struct, frozen=True, kw_only=True):
    """Whose agents a command acts on, and with which key."""

    org: str
    environment: str | None
    key: str
    url: str


def _scope(org: str, environment: str | None, key: str | None) -> Scope:
    if key is not None and (not key or key != key.strip() or not key.isprintable()):
        # an empty key went out as "Bearer " and httpx refused the header: said as call-log down
        raise click.BadParameter(f"{key!r} is not an operator or app key", param_hint="'--key'")
    settings = OperatorSettings.load()
    if key is None:
        if not settings.operator_key:
            raise CommandError(
                "unauthorized",
                "no operator key: set PINECALL_OPERATOR_KEY, or run ./dev up "
                f"(while it runs, {settings.state_dir}/up.json names one), or give --key",
            )
        key, environment = settings.operator_key, environment or "production"
    return Scope(org=org, environment=environment, key=key, url=settings.call_log_url)


def _client(scope: Scope) -> CallLogClient:
    return CallLogClient(scope.url, scope.key, request_timeout_s=WITHIN_S)


def _failed(exc: CallLogRefused | CallLogUnavailable, url: str) -> CommandError:
    """call-log's refusal or silence as the CLI says it."""
    if isinstance(exc, CallLogUnavailable):
        return CommandError(
            "unavailable",
            f"call-log did not answer at {url}: {exc} ({where_from('call_log_url')})",
            ExitCode.UNAVAILABLE,
        )
    problem = exc.problem
    said = [f"{problem.detail or problem.title}"]
    said += [
        f"  {e.get('path', e.get('key', ''))}: {e.get('message')}" for e in problem.errors or []
    ]
    code = ExitCode.NOT_FOUND if problem.status == 404 else ExitCode.FAILED
    return CommandError(problem.code or "refused", "\n".join(said), code)


def _unknown(raw: Any) -> list[str]:
    """The keys of a definition's mapping (and its tools') that no field has, each with the
    field it may have meant: the wire ignores unknown fields (``Contract``), so a misspelt
    ``max_call_second`` would be stored as the default without a word."""
    said: list[str] = []

    def check(mapping: Any, struct: type[msgspec.Struct], where: str) -> None:
        if not isinstance(mapping, dict):
            return
        fields = {*struct.__struct_fields__, "type"}
        for key in mapping:
            if key not in fields:
                near = difflib.get_close_matches(str(key), fields, n=1)
                said.append(f"{where}{key}: no such field" + (f" (not {near[0]}?)" if near else ""))

    check(raw, AgentDefinition, "")
    tools = raw.get("tools") if isinstance(raw, dict) else None
    for i, tool in enumerate(tools if isinstance(tools, list) else []):
        check(tool, AgentTool, f"tools[{i}].")
    return said


def read_definition(path: Path) -> AgentDefinition:
    """The definition in ``path`` (JSON for ``.json``, YAML otherwise); ``CommandError`` for a
    file that is none, or names a field no definition has."""
    try:
        text = path.read_text()
        raw: Any = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
        definition = msgspec.convert(raw, AgentDefinition)
    except (OSError, ValueError, yaml.YAMLError, msgspec.ValidationError) as exc:
        raise CommandError("bad_request", f"{path}: not an agent's definition: {exc}") from exc
    if unknown := _unknown(raw):
        raise CommandError("bad_request", f"{path}: " + "\n  ".join(["", *unknown]).lstrip())
    return definition


def _yaml(version: AgentVersion) -> str:
    head = (
        f"# {version.definition.name}: version {version.version} of {version.org} in "
        f"{version.environment}, {version.updated_at.isoformat()}, prompt sha256 "
        f"{version.prompt_hash}\n"
    )
    body = msgspec.to_builtins(version.definition)
    body.pop("type", None)
    for tool in body.get("tools", []):
        tool.pop("type", None)
    return head + yaml.safe_dump(body, sort_keys=False, allow_unicode=True, width=100)


def _matching(pattern: str, rule: str) -> Callable[[click.Context, click.Parameter, str], str]:
    def check(_ctx: click.Context, _param: click.Parameter, value: str) -> str:
        if not re.match(pattern, value):
            raise click.BadParameter(f"{value!r} is not {rule}")
        return value

    return check


org_option = click.option(
    "--org",
    required=True,
    callback=_matching(ORG_PATTERN, "an org id (A-Z a-z 0-9 _ . : -, 128 at most)"),
    help="The org whose agents these are.",
)
environment_option = click.option(
    "--environment",
    type=click.Choice(ENVIRONMENTS),
    default=None,
    help="The environment (an operator key: production when not given; an app key: its own).",
)
key_option = click.option(
    "--key", default=None, help="An org's app key instead of the operator's (its environment's)."
)
json_option = click.option("--json", "as_json", is_flag=True, help="JSON for scripts.")


@click.group()
def agents() -> None:
    """An org's agents on call-log: put a definition, list them, show one (any version)."""


@agents.command(name="put")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@org_option
@environment_option
@key_option
@json_option
@run
async def agents_put(
    file: Path, org: str, environment: str | None, key: str | None, as_json: bool
) -> None:
    """Store the agent FILE defines (YAML or JSON) as its next version; the same definition
    again stores nothing and says the version that stands."""
    definition = read_definition(file)
    scope = _scope(org, environment, key)
    try:
        async with _client(scope) as log:
            stored = await log.put_agent(
                definition, org=scope.org, environment=scope.environment, within_s=WITHIN_S
            )
    except (CallLogRefused, CallLogUnavailable) as exc:
        raise _failed(exc, scope.url) from exc
    if as_json:
        click.echo(msgspec.json.encode(stored).decode())
        return
    click.echo(
        f"{definition.name} ({stored.org}, {stored.environment}): version {stored.version}, "
        f"prompt sha256 {stored.prompt_hash[:12]}, stored {stored.updated_at.isoformat()}"
    )


@agents.command(name="list")
@org_option
@environment_option
@key_option
@json_option
@run
async def agents_list(org: str, environment: str | None, key: str | None, as_json: bool) -> None:
    """The latest version of each of the org's agents in the environment."""
    scope = _scope(org, environment, key)
    try:
        async with _client(scope) as log:
            listed = await log.agents(
                org=scope.org, environment=scope.environment, within_s=WITHIN_S
            )
    except (CallLogRefused, CallLogUnavailable) as exc:
        raise _failed(exc, scope.url) from exc
    if as_json:
        click.echo(msgspec.json.encode(listed).decode())
        return
    rows = [
        (
            a.definition.name,
            a.version,
            a.definition.model or "-",
            a.definition.voice or "-",
            ", ".join(t.name for t in a.definition.tools) or "-",
            a.updated_at.isoformat(timespec="seconds"),
        )
        for a in listed.agents
    ]
    click.echo(f"{listed.org} ({listed.environment}): {len(rows)} agents")
    if rows:
        click.echo(table(("agent", "version", "model", "voice", "tools", "updated"), rows))


@agents.command(name="show")
@click.argument(
    "name", callback=_matching(AGENT_PATTERN, "an agent's name (a-z 0-9 _ . -, 128 at most)")
)
@click.option("--version", type=click.IntRange(min=1), default=None, help="An older version.")
@org_option
@environment_option
@key_option
@json_option
@run
async def agents_show(
    name: str,
    version: int | None,
    org: str,
    environment: str | None,
    key: str | None,
    as_json: bool,
) -> None:
    """The agent NAME's latest version (or --version N), as YAML `agents put` takes back."""
    scope = _scope(org, environment, key)
    try:
        async with _client(scope) as log:
            found = await log.agent(
                name,
                org=scope.org,
                environment=scope.environment,
                version=version,
                within_s=WITHIN_S,
            )
    except (CallLogRefused, CallLogUnavailable) as exc:
        raise _failed(exc, scope.url) from exc
    click.echo(msgspec.json.encode(found).decode() if as_json else _yaml(found), nl=as_json)
