"""``pinecall-runtime roster serve|migrate``: the roster's process entry and image command."""

from __future__ import annotations

import click

from pinecall_roster.settings import RosterSettings
from pinecall_roster.store import migrate as migrate_roster
from pinecall_servicekit.lifecycle import serve_http, settings_or_exit


@click.group(name="roster")
def cli() -> None:
    """The roster: hears every worker of every fleet."""


@cli.command()
@click.option("--workers", default=1, show_default=True, help="Granian worker processes.")
def serve(workers: int) -> None:
    """Serve the roster's HTTP API and ops verbs (settings from the environment)."""
    settings = settings_or_exit(RosterSettings.from_env)
    settings_or_exit(settings.fleet_records)  # a malformed fleets or URLs setting fails now
    serve_http(
        "pinecall_roster.app:create_app",
        host=settings.host,
        port=settings.port,
        keep_alive_s=settings.keepalive_s,
        workers=workers,
    )


@cli.command()
def migrate() -> None:
    """Run the roster's migrations on PINECALL_DATABASE_URL."""
    migrate_roster(settings_or_exit(RosterSettings.from_env).database_url)
    click.echo("roster: migrated")
