"""The roster's settings, read once from the environment in ``main.py``."""

from __future__ import annotations

from typing import ClassVar

from pinecall_contracts.fleet import FleetRecord
from pinecall_servicekit.settings import Port, Settings, SettingsError, by_environment


class RosterSettings(Settings, frozen=True, kw_only=True):
    """Where the roster listens and the seed's numbers it counts by."""

    ENV_NAMES: ClassVar = {"livekit_url": "LIVEKIT_URL"}

    host: str = "127.0.0.1"
    port: Port = 8101
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
    """The LiveKit the fleets rows made at start dispatch on (``LIVEKIT_URL``), for an
    environment :attr:`livekit_urls` does not name."""
    livekit_urls: str = ""
    """``PINECALL_LIVEKIT_URLS``: ``production=URL,sandbox=URL``, each environment's LiveKit
    for the fleets rows made at start (as the reaper reads it); a stored row stays as it is."""

    def fleet_records(self) -> list[FleetRecord]:
        """:attr:`fleets` as rows, each on its environment's LiveKit (:attr:`livekit_urls`,
        else :attr:`livekit_url`); raises ``SettingsError`` when either is malformed."""
        urls = by_environment(self.livekit_urls, "PINECALL_LIVEKIT_URLS")
        records = []
        for item in filter(None, (part.strip() for part in self.fleets.split(","))):
            name, sep, environment = item.partition("=")
            if not sep or not name or not environment:
                raise SettingsError(f"PINECALL_FLEETS: not <fleet>=<environment>: {item!r}")
            records.append(
                FleetRecord(
                    name=name,
                    environment=environment,
                    livekit_url=urls.get(environment, self.livekit_url),
                )
            )
        return records
