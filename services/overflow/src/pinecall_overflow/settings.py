"""The overflow's settings: LiveKit's own names stay LiveKit's; the seeds' names stay the seeds'."""

from __future__ import annotations

from typing import ClassVar

from pinecall_servicekit.recordings import RecordingsSettings
from pinecall_servicekit.settings import HttpUrl, SettingsError

SAYS = (
    "Sorry, everyone is busy helping other callers right now. We have your number and will "
    "call you back as soon as we can. Goodbye."
)


class OverflowSettings(RecordingsSettings, frozen=True, kw_only=True):
    """What ``overflow start`` needs: LiveKit, the call log with the fleet key, a voice, and
    the recordings' bucket (``PINECALL_RECORDINGS_*``, read as the worker reads them)."""

    ENV_NAMES: ClassVar = {
        "livekit_url": "LIVEKIT_URL",
        "livekit_api_key": "LIVEKIT_API_KEY",
        "livekit_api_secret": "LIVEKIT_API_SECRET",
        "cartesia_api_key": "CARTESIA_API_KEY",
    }

    fleet: str = "pinecall"
    """``PINECALL_FLEET``: it registers as ``<fleet>/overflow``."""
    fleet_key: str | None = None
    """``PINECALL_FLEET_KEY``: the environment's fleet key, for call-log."""
    overflow_says: str = SAYS
    """``PINECALL_OVERFLOW_SAYS``: the one sentence (seed 000)."""
    host: str = "127.0.0.1"
    """Where the health port listens (``0.0.0.0`` in a pod, for its probes)."""
    health_port: int = 8081
    """``PINECALL_HEALTH_PORT``: answers 200 once LiveKit registered the overflow (0: any)."""
    livekit_url: str = "ws://127.0.0.1:7880"
    livekit_api_key: str | None = None
    livekit_api_secret: str | None = None
    call_log_url: HttpUrl = "http://127.0.0.1:8102"
    cartesia_url: str | None = None
    """Cartesia's base URL (the plugin's default when unset; the lab's fake in the lab)."""
    cartesia_api_key: str | None = None
    lab_rooms: bool = False
    """``PINECALL_LAB_ROOMS``: join rooms over the load lab's transport (under the LiveKit
    stand-in, which has no SFU) instead of ``ctx.connect()``."""
    drain_timeout_s: float = 600.0
    """Seconds a draining overflow waits for its sentences (seed 000, "Deploys drain")."""

    def check(self) -> OverflowSettings:
        """These settings, or ``SettingsError`` naming what the overflow cannot run without."""
        missing = [
            self.env_name(name)
            for name in ("fleet_key", "livekit_api_key", "livekit_api_secret")
            if not getattr(self, name)
        ]
        if missing:
            raise SettingsError(f"the overflow needs {', '.join(missing)}")
        return self
