"""webhook-ingest's settings, read once from the environment in ``main.py``."""

from __future__ import annotations

from pinecall_servicekit.livekit_keys import LiveKitSettings
from pinecall_servicekit.settings import Port


class IngestSettings(LiveKitSettings, frozen=True, kw_only=True):
    """Where it listens and each environment's LiveKit API keys (``keys()``). The LiveKit
    stream's settings are the subject registry's (``Subjects.livekit_stream_settings``), not
    this service's: the dispatcher makes the same stream."""

    host: str = "127.0.0.1"
    port: Port = 8104
