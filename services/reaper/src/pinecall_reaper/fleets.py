"""Each environment's LiveKit, as the reaper reaches it: keys from the settings, the URL from
``PINECALL_LIVEKIT_URLS`` where it names the environment, else the roster's fleets row (seed
000, "Who takes a call": "A room is dispatched on the LiveKit of its fleet's environment, which
the fleets row says"), else ``LIVEKIT_URL``.

The rows are read from the roster (``fleet.records`` over NATS, through the roster's client with
the reaper's service key, as the dispatcher reads them) at every reap; a roster that does not
answer leaves the rows last read, so a reap goes on with what it knew.
"""

from __future__ import annotations

import logging

from pinecall_clients.errors import RosterError
from pinecall_clients.livekit import LiveKitAccess
from pinecall_clients.roster import RosterClient
from pinecall_reaper.settings import ReaperSettings
from pinecall_servicekit.settings import by_environment, livekit_keys

_log = logging.getLogger(__name__)


class Fleets:
    """Resolves ``{environment: LiveKitAccess}``; ``roster`` reads the roster's fleets rows
    (None: none are read)."""

    def __init__(self, settings: ReaperSettings, roster: RosterClient | None) -> None:
        self.keys = livekit_keys(
            settings.livekit_keys, settings.livekit_api_key, settings.livekit_api_secret
        )
        self.urls = by_environment(settings.livekit_urls, "PINECALL_LIVEKIT_URLS")
        self.default_url = settings.livekit_url
        self.roster = roster
        self.rows: dict[str, str] = {}
        """The environment → LiveKit URL the roster's fleets rows last said."""

    async def livekits(self) -> dict[str, LiveKitAccess]:
        """Every environment with LiveKit keys, and the LiveKit it is on now (its key may list
        and delete rooms: ``roomList``, ``roomAdmin``, ``roomCreate``)."""
        if self.roster is not None and any(env not in self.urls for env in self.keys):
            await self._read_rows(self.roster)
        return {
            env: LiveKitAccess(
                url=self.urls.get(env) or self.rows.get(env) or self.default_url,
                api_key=key,
                api_secret=secret,
            )
            for env, (key, secret) in self.keys.items()
        }

    async def _read_rows(self, roster: RosterClient) -> None:
        try:
            records = await roster.fleets()
        except RosterError as exc:
            _log.warning("the roster's fleets rows were not read (%s); kept %s", exc, self.rows)
            return
        self.rows = {f.environment: f.livekit_url for f in records.fleets}
