"""``lab app MODULE:APP --ledger FILE`` (or ``python -m pinecall_loadlab.apps``): a tenant's app
run as ``pinecall start`` runs it, with a ledger of what it does
(:mod:`pinecall_loadlab.apps.ledger`)."""

from __future__ import annotations

from pathlib import Path

import click

from pinecall_servicekit.operator import Number


@click.command(name="app")
@click.argument("target", metavar="MODULE:APP")
@click.option("--app-dir", default=".", show_default=True, help="Where MODULE is found.")
@click.option(
    "--ledger",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="Append a JSON line (lab.app.v1) here for each call attached or detached, each tool "
    "handler entered, and each time the agents are held.",
)
@click.option(
    "--drain-timeout",
    type=Number(min=0, min_open=True),
    default=600.0,
    show_default=True,
    help="Seconds a drain waits for the app's calls and tools before it stops anyway.",
)
@click.option(
    "--log-level",
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"]),
    default="INFO",
    show_default=True,
)
def app(target: str, app_dir: str, ledger: Path, drain_timeout: float, log_level: str) -> None:
    """Run the app MODULE:APP as `pinecall start` does (SIGTERM drains, then exit 0; the same
    exit codes), its tool handlers and hooks unchanged, writing its ledger to FILE."""
    import asyncio
    import logging
    import sys

    from pinecall.cli import ExitCode, load
    from pinecall.errors import BadURL, PinecallError, Refused
    from pinecall_loadlab.apps.ledger import Ledger, serving, watch

    if not ledger.resolve().parent.is_dir():
        raise click.BadParameter(
            f"{ledger.resolve().parent} is not a folder", param_hint="'--ledger'"
        )
    logging.basicConfig(
        level=log_level, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    held = load(target, app_dir)
    with Ledger(ledger, held.instance) as written:
        watch(held, written)
        try:
            code = asyncio.run(serving(held, written, drain_timeout))
        except (Refused, BadURL) as exc:
            click.echo(f"Error: [{exc.code}] {exc.message}", err=True)
            sys.exit(ExitCode.CONFIG)
        except PinecallError as exc:
            click.echo(f"Error: [{exc.code}] {exc.message}", err=True)
            sys.exit(ExitCode.CUT_SHORT)
    sys.exit(code)
