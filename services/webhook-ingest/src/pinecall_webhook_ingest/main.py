"""``pinecall-runtime webhook-ingest serve``: the process entry and image command."""

from __future__ import annotations

from pinecall_servicekit.lifecycle import service_cli
from pinecall_webhook_ingest.settings import IngestSettings

cli = service_cli(
    "webhook-ingest",
    about="webhook-ingest: LiveKit's webhooks, verified, once each on NATS.",
    app="pinecall_webhook_ingest.app:create_app",
    settings=IngestSettings.from_env,
    check=IngestSettings.keys,  # a missing or malformed key fails now, not at a webhook
    serves="Serve POST /v1/livekit/webhook (settings from the environment).",
)
