"""The roster's settings, read once from the environment in ``main.py``."""

from __future__ import annotations

from typing import ClassVar

from pinecall_contracts.fleet import FleetRecord
from pinecall_servicekit.settings import Settings, SettingsError


class RosterSettings(Settings, frozen=True, kw_only=True):
    """Where the roster listens and the seed's numbers it counts by."""

    ENV_NAMES: ClassVar = {"livekit_url": "LIVEKIT_URL"}

    host: str = "127.0.0.1"
    port: int = 8101
    silent_s: float = 30.0
    """Seconds without a heartbeat before a worker is no longer capacity (seed 000)."""
    forgotten_s: float = 3600.0
    """Seconds without a heartbeat before a worker is forgotten (seed 000)."""
    key_cache_s: float = 5.0
    """Seconds a verified key is remembered (seed 000, "Three planes")."""
    wanted_target: float = 0.6
    """Share of a scaled worker's seats its calls should fill (seed 000, "The burst")."""
    fleets: str = "pinecall=production,pinecall-sandbox=sandbox"
    """The fleets rows made at start when absent: ``<fleet>=<environment>,...``."""
    livekit_url: str = "ws://127.0.0.1:7880"
    """The LiveKit the default fleets dispatch on (``LIVEKIT_URL``)."""

    def fleet_records(self) -> list[FleetRecord]:
        """:attr:`fleets` as rows; raises ``SettingsError`` when malformed."""
        records = []
        for item in filter(None, (part.strip() for part in self.fleets.split(","))):
            name, sep, environment = item.partition("=")
            if not sep or not name or not environment:
                raise SettingsError(f"PINECALL_FLEETS: not <fleet>=<environment>: {item!r}")
            records.append(
                FleetRecord(name=name, environment=environment, livekit_url=self.livekit_url)
            )
        return records
