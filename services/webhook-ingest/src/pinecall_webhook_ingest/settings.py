"""webhook-ingest's settings, read once from the environment in ``main.py``."""

from __future__ import annotations

from pinecall_servicekit.livekit_keys import LiveKitSettings


class IngestSettings(LiveKitSettings, frozen=True, kw_only=True):
    """Where it listens and each environment's LiveKit API keys (``keys()``)."""

    host: str = "127.0.0.1"
    port: int = 8104
    stream_duplicate_window_s: float = 120.0
    """How long the stream remembers a webhook's id: past LiveKit's 30 s of retries."""
    stream_max_age_s: float = 86_400.0
    """How long the stream keeps an event for a consumer that was down."""
