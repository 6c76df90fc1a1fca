"""``pinecall-runtime numbers put FILE | list | show ID``: an org's WhatsApp numbers on call-log;
``numbers phone …``: its phone numbers on the dispatcher (:mod:`pinecall_runtime.phones`).

Shaped as ``agents`` (:mod:`pinecall_runtime.agents`): call-log's HTTP (``PUT/GET
/v1/whatsapp/numbers``) at ``PINECALL_CALL_LOG_URL``, the operator's key (``--key`` an org's app
key instead), ``--org`` and ``--environment``. ``put`` reads a YAML or JSON file, so the secrets
never go on a command line (nor into a shell's history)::

    phone_number_id: "106540352242922"
    agent: booking
    display_phone_number: "+15550783881"   # E.164 as Meta shows it; kept as its digits
    verify_token: …      # what Meta's handshake carries: your choice, 8+ printable characters
    app_secret: …        # the Meta app's App Secret (signs the webhooks)
    access_token: …      # the Bearer token replies are sent with

No command prints a secret: call-log never answers one. Exit codes as ``agents``'s: a file that
is no number or a number call-log refuses 1, a number unknown 5, call-log not answering 69.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
import msgspec
import yaml

from pinecall_clients.errors import CallLogRefused, CallLogUnavailable
from pinecall_contracts.plain import plainly
from pinecall_contracts.whatsapp import (
    PHONE_NUMBER_ID_PATTERN,
    WhatsAppNumber,
    WhatsAppNumberPut,
    display_digits,
)
from pinecall_runtime.agents import (
    WITHIN_S,
    _client,
    _failed,
    _matching,
    _scope,
    environment_option,
    json_option,
    key_option,
    org_option,
)
from pinecall_runtime.phones import phone
from pinecall_servicekit.operator import CommandError, run, table


def read_number(path: Path) -> tuple[str, WhatsAppNumberPut]:
    """The number in ``path``: its id and what is put; ``CommandError`` for a file that is none."""
    try:
        text = path.read_text()
        raw: Any = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
        if not isinstance(raw, dict):
            raise ValueError("a mapping of phone_number_id, agent and the secrets")
        number_id = str(raw.pop("phone_number_id", ""))
        _matching(PHONE_NUMBER_ID_PATTERN, "digits")(None, None, number_id)  # type: ignore[arg-type]
        unknown = set(raw) - set(WhatsAppNumberPut.__struct_fields__)
        if unknown:
            raise ValueError(f"no such field: {', '.join(sorted(unknown))}")
        put = msgspec.convert(raw, WhatsAppNumberPut)
        put = msgspec.structs.replace(
            put, display_phone_number=display_digits(put.display_phone_number)
        )
    except (OSError, ValueError, yaml.YAMLError, msgspec.ValidationError, click.BadParameter) as e:
        said = e.format_message() if isinstance(e, click.BadParameter) else plainly(str(e))
        raise CommandError("bad_request", f"{path}: not a WhatsApp number: {said}") from e
    return number_id, put


def _line(n: WhatsAppNumber) -> str:
    display = f" (+{n.display_phone_number})" if n.display_phone_number else ""
    return (
        f"{n.phone_number_id}{display} ({n.org}, {n.environment}): agent {n.agent}, "
        f"updated {n.updated_at.isoformat(timespec='seconds')}"
    )


@click.group()
def numbers() -> None:
    """An org's WhatsApp numbers on call-log (put, list, show) and its phone numbers on the
    dispatcher (phone put, list, show, remove)."""


numbers.add_command(phone)


@numbers.command(name="put")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@org_option
@environment_option
@key_option
@json_option
@run
async def numbers_put(
    file: Path, org: str, environment: str | None, key: str | None, as_json: bool
) -> None:
    """Tie the number FILE describes (YAML or JSON) to its agent, with its secrets.

    \b
    FILE holds phone_number_id (Meta's, digits), agent, display_phone_number (E.164 as Meta
    shows it, like +15551234567; kept as its digits) and the three secrets, each 8 to 512
    printable ASCII characters with no spaces: verify_token (your choice: what Meta's webhook
    handshake carries), app_secret (the Meta app's App Secret) and access_token.
    """
    number_id, put = read_number(file)
    scope = _scope(org, environment, key)
    try:
        async with _client(scope) as log:
            stored = await log.put_number(
                number_id, put, org=scope.org, environment=scope.environment, within_s=WITHIN_S
            )
    except (CallLogRefused, CallLogUnavailable) as exc:
        raise _failed(exc, scope.url) from exc
    click.echo(msgspec.json.encode(stored).decode() if as_json else _line(stored))


@numbers.command(name="list")
@org_option
@environment_option
@key_option
@json_option
@run
async def numbers_list(org: str, environment: str | None, key: str | None, as_json: bool) -> None:
    """The org's WhatsApp numbers in the environment."""
    scope = _scope(org, environment, key)
    try:
        async with _client(scope) as log:
            listed = await log.numbers(org=scope.org, environment=scope.environment,
                                       within_s=WITHIN_S)  # fmt: skip
    except (CallLogRefused, CallLogUnavailable) as exc:
        raise _failed(exc, scope.url) from exc
    if as_json:
        click.echo(msgspec.json.encode(listed).decode())
        return
    rows = [
        (n.phone_number_id, n.display_phone_number or "-", n.agent,
         n.updated_at.isoformat(timespec="seconds"))
        for n in listed.numbers
    ]  # fmt: skip
    click.echo(f"{listed.org} ({listed.environment}): {len(rows)} WhatsApp numbers")
    if rows:
        click.echo(table(("phone_number_id", "display", "agent", "updated"), rows))


@numbers.command(name="show")
@click.argument("phone_number_id", callback=_matching(PHONE_NUMBER_ID_PATTERN, "digits"))
@org_option
@environment_option
@key_option
@json_option
@run
async def numbers_show(
    phone_number_id: str, org: str, environment: str | None, key: str | None, as_json: bool
) -> None:
    """One of the org's WhatsApp numbers (no secret: call-log never answers one)."""
    scope = _scope(org, environment, key)
    try:
        async with _client(scope) as log:
            found = await log.number(phone_number_id, org=scope.org,
                                     environment=scope.environment, within_s=WITHIN_S)  # fmt: skip
    except (CallLogRefused, CallLogUnavailable) as exc:
        raise _failed(exc, scope.url) from exc
    click.echo(msgspec.json.encode(found).decode() if as_json else _line(found))
