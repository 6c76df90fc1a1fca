"""``pinecall-runtime call-log serve|migrate``: the call log's process entry and image command."""

from __future__ import annotations

import click

from pinecall_call_log.settings import CallLogSettings
from pinecall_call_log.store import migrate as migrate_call_log
from pinecall_servicekit.lifecycle import serve_http


@click.group(name="call-log")
def cli() -> None:
    """The call log: every entry of every call, exactly once, in order."""


@cli.command()
@click.option("--workers", default=1, show_default=True, help="Granian worker processes.")
def serve(workers: int) -> None:
    """Serve the call log's HTTP API (settings from the environment)."""
    settings = CallLogSettings.from_env()
    serve_http(
        "pinecall_call_log.app:create_app",
        host=settings.host,
        port=settings.port,
        keep_alive_s=settings.keepalive_s,
        workers=workers,
    )


@cli.command()
def migrate() -> None:
    """Run the call log's migrations on PINECALL_DATABASE_URL."""
    migrate_call_log(CallLogSettings.from_env().database_url)
    click.echo("call-log: migrated")
