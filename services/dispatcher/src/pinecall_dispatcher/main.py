"""``pinecall-runtime dispatcher …``: the dispatcher's process entry and image command.

Its one command so far, ``decide``, runs the rules on a fleet's rows from a JSON file, so an
operator can ask "who would take a call now, and why" of a ``fleet list --json`` they saved.
"""

from __future__ import annotations

import time
from pathlib import Path

import click
import msgspec

from pinecall_contracts.fleet import RosterSnapshot
from pinecall_dispatcher import domain


@click.group(name="dispatcher")
def cli() -> None:
    """The dispatcher: who answers each call."""


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
