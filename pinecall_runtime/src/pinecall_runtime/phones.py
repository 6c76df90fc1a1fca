"""``pinecall-runtime numbers phone put NUMBER --agent A | list | show NUMBER | remove NUMBER``:
an org's phone numbers on the dispatcher (issue 18), beside its WhatsApp numbers (``numbers
put|list|show``, call-log's).

Over the dispatcher's HTTP (``/v1/phone-numbers``, :mod:`pinecall_clients.dispatcher`) at
``PINECALL_DISPATCHER_URL`` (``up.json`` names the one ``./dev up`` runs), with the operator's
key and ``--org`` / ``--environment`` (production by default), or an org's app key (``--key``),
as ``agents``. A put makes the number's trunk and dispatch rule on the environment's LiveKit;
remove deletes them. Exit codes as ``agents``'s: a number refused 1 (``invalid_number``,
``unknown_agent``, ``number_taken``), a number unknown 5, the dispatcher or LiveKit not
answering 69.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import click
import msgspec

from pinecall_clients.dispatcher import DispatcherClient
from pinecall_clients.errors import DispatcherRefused, DispatcherUnavailable
from pinecall_contracts.ids import AGENT_PATTERN, E164_PATTERN
from pinecall_contracts.phones import PhoneNumber
from pinecall_runtime.agents import (
    WITHIN_S,
    Scope,
    _matching,
    _scope,
    environment_option,
    json_option,
    key_option,
    org_option,
)
from pinecall_servicekit.lifecycle import ExitCode
from pinecall_servicekit.operator import CommandError, OperatorSettings, run, table, where_from

T = TypeVar("T")
_number = _matching(E164_PATTERN, "an E.164 number (+15550100)")


async def _asked(scope: Scope, ask: Callable[[DispatcherClient], Awaitable[T]]) -> T:
    """``ask``'s answer from the dispatcher with ``scope``'s key, or the CLI's named error."""
    url = OperatorSettings.load().dispatcher_url
    try:
        async with DispatcherClient(url, scope.key, timeout_s=WITHIN_S) as client:
            return await ask(client)
    except (DispatcherRefused, DispatcherUnavailable) as exc:
        raise _failed(exc, url) from exc


def _failed(exc: DispatcherRefused | DispatcherUnavailable, url: str) -> CommandError:
    if isinstance(exc, DispatcherUnavailable):
        return CommandError(
            "unavailable",
            f"the dispatcher did not answer at {url}: {exc} ({where_from('dispatcher_url')})",
            ExitCode.UNAVAILABLE,
        )
    problem = exc.problem
    code = ExitCode.NOT_FOUND if problem.status == 404 else ExitCode.FAILED
    return CommandError(problem.code or "refused", problem.detail or problem.title, code)


def _line(n: PhoneNumber) -> str:
    return (
        f"{n.number} ({n.org}, {n.environment}): agent {n.agent}, fleet {n.fleet}, "
        f"trunk {n.trunk_id}, rule {n.rule_id}"
    )


@click.group()
def phone() -> None:
    """An org's phone numbers: each rings one agent (a SIP trunk and rule on LiveKit)."""


@phone.command(name="put")
@click.argument("number", callback=_number)
@click.option("--agent", required=True, callback=_matching(AGENT_PATTERN, "an agent's name"),
              help="The org's agent the number rings.")  # fmt: skip
@org_option
@environment_option
@key_option
@json_option
@run
async def phone_put(
    number: str, agent: str, org: str, environment: str | None, key: str | None, as_json: bool
) -> None:
    """Tie NUMBER to the org's agent: its trunk and dispatch rule made on LiveKit."""
    s = _scope(org, environment, key)
    made = await _asked(
        s, lambda c: c.put_number(number, agent, org=s.org, environment=s.environment)
    )
    click.echo(msgspec.json.encode(made).decode() if as_json else _line(made))


@phone.command(name="list")
@org_option
@environment_option
@key_option
@json_option
@run
async def phone_list(org: str, environment: str | None, key: str | None, as_json: bool) -> None:
    """The org's phone numbers in the environment."""
    s = _scope(org, environment, key)
    listed = await _asked(s, lambda c: c.numbers(org=s.org, environment=s.environment))
    if as_json:
        click.echo(msgspec.json.encode(listed).decode())
        return
    rows = [(n.number, n.agent, n.fleet, n.trunk_id, n.rule_id) for n in listed.numbers]
    click.echo(f"{listed.org} ({listed.environment}): {len(rows)} phone numbers")
    if rows:
        click.echo(table(("number", "agent", "fleet", "trunk", "rule"), rows))


@phone.command(name="show")
@click.argument("number", callback=_number)
@org_option
@environment_option
@key_option
@json_option
@run
async def phone_show(
    number: str, org: str, environment: str | None, key: str | None, as_json: bool
) -> None:
    """One of the org's phone numbers."""
    s = _scope(org, environment, key)
    found = await _asked(s, lambda c: c.number(number, org=s.org, environment=s.environment))
    click.echo(msgspec.json.encode(found).decode() if as_json else _line(found))


@phone.command(name="remove")
@click.argument("number", callback=_number)
@org_option
@environment_option
@key_option
@json_option
@run
async def phone_remove(
    number: str, org: str, environment: str | None, key: str | None, as_json: bool
) -> None:
    """Remove NUMBER: its dispatch rule and trunk deleted from LiveKit."""
    s = _scope(org, environment, key)
    gone = await _asked(s, lambda c: c.remove_number(number, org=s.org, environment=s.environment))
    click.echo(msgspec.json.encode(gone).decode() if as_json else f"removed {_line(gone)}")
