"""``pinecall-runtime webhook-ingest serve``: the process entry and image command."""

from __future__ import annotations

import click

from pinecall_servicekit.lifecycle import serve_http, settings_or_exit
from pinecall_webhook_ingest.settings import IngestSettings


@click.group(name="webhook-ingest")
def cli() -> None:
    """webhook-ingest: LiveKit's webhooks, verified, once each on NATS."""


@cli.command()
@click.option("--workers", default=1, show_default=True, help="Granian worker processes.")
def serve(workers: int) -> None:
    """Serve POST /v1/livekit/webhook (settings from the environment)."""
    settings = settings_or_exit(IngestSettings.from_env)
    settings_or_exit(settings.keys)  # a missing or malformed key fails now, not at a webhook
    serve_http(
        "pinecall_webhook_ingest.app:create_app",
        host=settings.host,
        port=settings.port,
        keep_alive_s=settings.keepalive_s,
        workers=workers,
    )
