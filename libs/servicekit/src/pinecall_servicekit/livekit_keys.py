"""Each environment's LiveKit API keys, read the same way by every service that speaks to LiveKit.

``PINECALL_LIVEKIT_KEYS=production=KEY:SECRET,sandbox=KEY:SECRET`` names every environment's;
where it names no production, LiveKit's own ``LIVEKIT_API_KEY`` and ``LIVEKIT_API_SECRET`` are
production's. webhook-ingest verifies webhooks with them; the dispatcher calls Twirp and mints
visitors' tokens with them.
"""

from __future__ import annotations

from typing import ClassVar

from pinecall_servicekit.settings import Settings, livekit_keys


class LiveKitSettings(Settings, frozen=True, kw_only=True):
    """The settings of a service that holds LiveKit's keys (a base for its own settings)."""

    ENV_NAMES: ClassVar = {
        "livekit_api_key": "LIVEKIT_API_KEY",
        "livekit_api_secret": "LIVEKIT_API_SECRET",
    }

    livekit_api_key: str | None = None
    """The production LiveKit's API key (``LIVEKIT_API_KEY``)."""
    livekit_api_secret: str | None = None
    livekit_keys: str = ""
    """Every environment's keys: ``production=KEY:SECRET,sandbox=KEY:SECRET``; where it names no
    production, ``LIVEKIT_API_KEY`` and ``LIVEKIT_API_SECRET`` are production's."""

    def keys(self) -> dict[str, tuple[str, str]]:
        """``{environment: (api_key, api_secret)}``; ``SettingsError`` when malformed or empty."""
        return livekit_keys(self.livekit_keys, self.livekit_api_key, self.livekit_api_secret)
