"""``pinecall-runtime dispatcher serve|migrate|decide|quota``: the process entry and image command.

- ``serve``: the token endpoint, the ops endpoints and verbs, the LiveKit stream's consumer and the
  sweep (settings from the environment; port 8103).
- ``migrate``: the ``dispatcher`` schema on ``PINECALL_DATABASE_URL``.
- ``decide FILE``: who a new call would be offered to, from a saved ``fleet list --json``.
- ``quota set ORG --environment E --concurrent-calls N`` and ``quota list``: the orgs' quotas
  (the ``dispatcher.quotas`` table, written directly, as ``keys create`` writes keys).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Literal

import click
import msgspec

from pinecall_contracts.dispatch import Quota
from pinecall_contracts.fleet import RosterSnapshot
from pinecall_contracts.ids import ENVIRONMENTS
from pinecall_dispatcher import domain
from pinecall_dispatcher.settings import DispatcherSettings
from pinecall_dispatcher.store import Store, migrate
from pinecall_servicekit import db
from pinecall_servicekit.lifecycle import service_cli
from pinecall_servicekit.operator import OperatorSettings, run, table

cli = service_cli(
    "dispatcher",
    about="The dispatcher: who answers each call, and admission at the token endpoint.",
    app="pinecall_dispatcher.app:create_app",
    settings=DispatcherSettings.from_env,
    check=DispatcherSettings.keys,  # a missing or malformed key fails now, not at a ring
    serves="Serve the token endpoint and ops, consume LiveKit's events, sweep the offers.",
    migrate=migrate,
)


@cli.command()
@click.argument("snapshot", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--fleet", default="pinecall", show_default=True)
def decide(snapshot: Path, fleet: str) -> None:
    """Who a new call of FLEET would be offered to, given a saved `fleet list --json`."""
    try:
        roster = msgspec.json.decode(snapshot.read_bytes(), type=RosterSnapshot)
    except msgspec.MsgspecError as exc:
        raise click.ClickException(f"[bad_request] not a fleet list --json: {exc}") from exc
    views = [v for v in roster.fleets if v.fleet == fleet]
    if not views:
        raise click.ClickException(f"[not_found] no fleet {fleet!r} in {snapshot}")
    now = time.time()
    decision = domain.decide(
        domain.Room(name="new-call", arrived_at=now), views[0].workers, {}, now
    )
    if isinstance(decision, domain.Offer):
        click.echo(decision.journal("new-call"))
    else:
        click.echo(
            f"room new-call: {type(decision).__name__.lower()}: "
            f"{msgspec.json.encode(decision).decode()}"
        )


@cli.group()
def quota() -> None:
    """An org's concurrent_calls per environment, held at the token endpoint."""


@quota.command(name="set")
@click.argument("org")
@click.option(
    "--environment", type=click.Choice(ENVIRONMENTS), default="production", show_default=True
)
@click.option("--concurrent-calls", type=click.IntRange(0, 1_000_000), required=True)
@run
async def quota_set(
    org: str, environment: Literal["production", "sandbox"], concurrent_calls: int
) -> None:
    """Set ORG's concurrent_calls in an environment (0 refuses every new call)."""
    try:
        wanted = Quota(org=org, environment=environment, concurrent_calls=concurrent_calls)
        msgspec.convert(msgspec.to_builtins(wanted), Quota)  # the contract's bounds on org
    except msgspec.ValidationError as exc:
        raise click.BadParameter(str(exc), param_hint="ORG") from exc
    engine = db.create_engine(OperatorSettings.load().database_url, pool_size=1)
    try:
        done = await Store(engine).admissions.set_quota(wanted)
    finally:
        await engine.dispose()
    click.echo(f"{done.org} ({done.environment}): {done.concurrent_calls} concurrent calls")


@quota.command(name="list")
@click.option("--json", "as_json", is_flag=True)
@run
async def quota_list(as_json: bool) -> None:
    """Every org's quotas."""
    engine = db.create_engine(OperatorSettings.load().database_url, pool_size=1)
    try:
        quotas = await Store(engine).admissions.quotas()
    finally:
        await engine.dispose()
    if as_json:
        click.echo(msgspec.json.encode(quotas).decode())
        return
    click.echo(
        table(
            ("org", "environment", "concurrent calls"),
            [(q.org, q.environment, q.concurrent_calls) for q in quotas],
        )
    )
