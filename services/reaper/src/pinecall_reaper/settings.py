"""The reaper's settings, read once from the environment in ``main.py``.

LiveKit per environment as webhook-ingest reads its keys: ``PINECALL_LIVEKIT_KEYS`` names each
environment's ``KEY:SECRET`` (``LIVEKIT_API_KEY``/``_SECRET`` are production's when it names no
production). The environments reaped are those with keys; where each one's LiveKit is, is
:mod:`pinecall_reaper.fleets`' (``PINECALL_LIVEKIT_URLS``, the roster's fleets rows,
``LIVEKIT_URL``).
"""

from __future__ import annotations

from typing import ClassVar

from pinecall_servicekit.recordings import RecordingsSettings
from pinecall_servicekit.settings import (
    HttpUrl,
    Port,
    SettingsError,
    by_environment,
    livekit_keys,
)


class ReaperSettings(RecordingsSettings, frozen=True, kw_only=True):
    """Where the reaper listens, what it reads, the seeds' numbers it reaps by, and the
    recordings' bucket (:class:`RecordingsSettings`): a call it seals whose recording a dead job
    left unfinished has its uploaded parts kept first (issue 19)."""

    ENV_NAMES: ClassVar = {
        "livekit_url": "LIVEKIT_URL",
        "livekit_api_key": "LIVEKIT_API_KEY",
        "livekit_api_secret": "LIVEKIT_API_SECRET",
    }

    host: str = "127.0.0.1"
    port: Port = 8105
    call_log_url: HttpUrl = "http://127.0.0.1:8102"
    service_key: str | None = None
    """``PINECALL_SERVICE_KEY``: the reaper's own key (``keys create --kind service``, never a
    person's operator key): it lists, ends and seals calls of every environment through
    call-log, and reads the fleets rows from the roster over NATS."""
    reap_every_s: float = 60.0
    """Seconds between two reaps (seed 002, "The reaper looks every minute")."""
    quiet_s: float = 300.0
    """Seconds a call with no agent in its room stays quiet before it ends drained; also the
    age at which a room no unsealed call names is taken down (seed 002: five minutes)."""
    max_call_seconds: float = 1800.0
    chat_quiet_s: float = 300.0
    """Seconds a chat stays quiet before it ends ``timeout`` (seed 002: five minutes; ``up``
    shortens it, so its chats end within its run)."""
    whatsapp_quiet_s: float = 7200.0
    """Seconds a WhatsApp thread stays quiet before it ends ``timeout`` (seed 002: two hours)."""
    """``MAX_CALL_SECONDS``: a call older than this ends ``timeout`` (seed 003: 30 minutes)."""
    livekit_url: str = "ws://127.0.0.1:7880"
    """The LiveKit of an environment neither ``PINECALL_LIVEKIT_URLS`` nor a fleets row names."""
    livekit_urls: str = ""
    """``production=URL,sandbox=URL``: each environment's LiveKit, before the fleets rows."""
    livekit_api_key: str | None = None
    livekit_api_secret: str | None = None
    livekit_keys: str = ""
    """``production=KEY:SECRET,sandbox=KEY:SECRET``, as webhook-ingest reads it."""

    def check(self) -> ReaperSettings:
        """These settings, or ``SettingsError`` naming what the reaper cannot run without."""
        if not self.service_key:
            raise SettingsError(
                "the reaper needs PINECALL_SERVICE_KEY (pinecall-runtime keys create --kind service)"
            )
        livekit_keys(self.livekit_keys, self.livekit_api_key, self.livekit_api_secret)
        by_environment(self.livekit_urls, "PINECALL_LIVEKIT_URLS")
        return self
