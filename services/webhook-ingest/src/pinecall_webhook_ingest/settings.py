"""webhook-ingest's settings, read once from the environment in ``main.py``."""

from __future__ import annotations

from typing import ClassVar

from pinecall_servicekit.settings import Settings, livekit_keys


class IngestSettings(Settings, frozen=True, kw_only=True):
    """Where it listens and each environment's LiveKit API keys."""

    ENV_NAMES: ClassVar = {
        "livekit_api_key": "LIVEKIT_API_KEY",
        "livekit_api_secret": "LIVEKIT_API_SECRET",
    }

    host: str = "127.0.0.1"
    port: int = 8104
    livekit_api_key: str | None = None
    """The production LiveKit's API key (``LIVEKIT_API_KEY``)."""
    livekit_api_secret: str | None = None
    livekit_keys: str = ""
    """Every environment's keys: ``production=KEY:SECRET,sandbox=KEY:SECRET``; where it names no
    production, ``LIVEKIT_API_KEY`` and ``LIVEKIT_API_SECRET`` are production's."""
    stream_duplicate_window_s: float = 120.0
    """How long the stream remembers a webhook's id: past LiveKit's 30 s of retries."""
    stream_max_age_s: float = 86_400.0
    """How long the stream keeps an event for a consumer that was down."""

    def keys(self) -> dict[str, tuple[str, str]]:
        """``{environment: (api_key, api_secret)}``; ``SettingsError`` when malformed or empty."""
        return livekit_keys(self.livekit_keys, self.livekit_api_key, self.livekit_api_secret)
