"""Each environment's LiveKit, as the dispatcher reaches it through the LiveKit adapter
(:mod:`pinecall_clients.livekit`: AgentDispatchService and RoomService).

A room lives on the LiveKit of its fleet's environment: the fleets row's ``livekit_url``, with
that environment's keys. ListDispatch answers ``not_found`` for a room that is not active
(``RoomGone``): that is how the dispatcher never creates a dispatch on a room that is gone, since
CreateDispatch would make the room again. A request is given :data:`TIMEOUT_S` and is never
retried here: an offer LiveKit did not take is offered again by the sweep.

Errors are the adapter's (``LiveKitUnavailable``, ``LiveKitRefused``, ``RoomGone``); an
environment with no keys is ``LiveKitUnavailable`` too.
"""

from __future__ import annotations

from pinecall_clients.livekit import LiveKit, LiveKitAccess, LiveKitUnavailable

TIMEOUT_S = 5.0
"""A Twirp call that takes longer is a LiveKit that does not answer."""


class LiveKits:
    """The LiveKit of each environment, made on first use from its URL and keys."""

    def __init__(self, keys: dict[str, tuple[str, str]]) -> None:
        self.keys = keys
        self._by_environment: dict[str, LiveKit] = {}
        self._retired: list[LiveKit] = []

    def of(self, environment: str, url: str) -> LiveKit:
        """``environment``'s LiveKit at ``url``; ``LiveKitUnavailable`` without its keys."""
        known = self._by_environment.get(environment)
        if known is not None and known.access.url == url:
            return known
        if environment not in self.keys:
            raise LiveKitUnavailable(f"no LiveKit keys for environment {environment!r}")
        if known is not None:
            self._retired.append(known)  # its fleets row names another URL now
        key, secret = self.keys[environment]
        access = LiveKitAccess(url=url, api_key=key, api_secret=secret)
        made = self._by_environment[environment] = LiveKit(
            access, timeout_s=TIMEOUT_S, failover=False
        )
        return made

    async def aclose(self) -> None:
        for lk in [*self._by_environment.values(), *self._retired]:
            await lk.aclose()
        self._by_environment.clear()
        self._retired.clear()
