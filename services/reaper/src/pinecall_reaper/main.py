"""``pinecall-runtime reaper serve``: the reaper's process entry and image command."""

from __future__ import annotations

import click

from pinecall_reaper.settings import ReaperSettings
from pinecall_servicekit.lifecycle import serve_http, settings_or_exit


@click.group(name="reaper")
def cli() -> None:
    """The reaper: every minute, ends what nobody is running and takes down its room."""


@cli.command()
def serve() -> None:
    """Serve /healthz, /readyz and /metrics and sweep every PINECALL_REAP_EVERY_S seconds.

    One Granian worker: the sweep runs in the app's lifespan, and a second replica is another
    process (replicas do not fight, see pinecall_reaper.reaper)."""
    settings = settings_or_exit(lambda: ReaperSettings.from_env().check())
    serve_http(
        "pinecall_reaper.app:create_app",
        host=settings.host,
        port=settings.port,
        keep_alive_s=settings.keepalive_s,
    )
