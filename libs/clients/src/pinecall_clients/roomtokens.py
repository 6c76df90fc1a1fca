"""One token a room for LiveKit's calls on that room (issue 20).

livekit-api signs a JWT for each Twirp call (``Service._auth_header``), 0.11 ms of CPU here, and a
ring's four calls (ListDispatch, ListParticipants, CreateDispatch, DeleteDispatch at the hang-up)
are all on its room: under ``bench/ring_to_offer.py`` the signing was a tenth of the dispatcher's
CPU. :class:`RoomTokens` signs the grant livekit-api itself signs for those calls (``roomAdmin`` of
the room, LiveKit's ``EnsureAdminPermission``) once, and hands out a
:meth:`~livekit.api.LiveKitAPI.with_token` client that sends it, for :data:`REUSE_S`.
"""

from __future__ import annotations

import datetime as dt
import time
from collections import OrderedDict

import aiohttp
from livekit import api

from pinecall_clients.livekit_types import LiveKitAccess

TTL = dt.timedelta(minutes=10)
"""How long a room's token is valid (its ``exp``)."""
REUSE_S = 300.0
"""How long a room's token is sent before another is signed: half its life, so a token in use
is never near its end, even on a LiveKit whose clock is minutes ahead."""
KEPT = 4096
"""Rooms whose token is kept at most; the least recently used goes first."""


class RoomTokens:
    """livekit-api clients each sending one room's token, on one aiohttp session."""

    def __init__(self, access: LiveKitAccess, *, failover: bool) -> None:
        self.access, self.failover = access, failover
        self._rooms: OrderedDict[str, tuple[float, api.LiveKitAPI]] = OrderedDict()
        """Room → (the wall-clock time its token is sent until, a client sending it): the
        wall clock, as its ``exp`` is read by LiveKit, so a machine suspended past the reuse
        time signs anew."""

    def of(self, room: str, session: aiohttp.ClientSession) -> api.LiveKitAPI:
        """A client sending ``room``'s token, signed when none is held or its time is over."""
        now = time.time()
        held = self._rooms.get(room)
        if held is not None and held[0] > now:
            self._rooms.move_to_end(room)
            return held[1]
        token = (
            api.AccessToken(self.access.api_key, self.access.api_secret)
            .with_grants(api.VideoGrants(room_admin=True, room=room))
            .with_ttl(TTL)
            .to_jwt()
        )
        made = api.LiveKitAPI.with_token(
            token, self.access.url, session=session, failover=self.failover
        )
        self._rooms[room] = (now + REUSE_S, made)
        self._rooms.move_to_end(room)
        while len(self._rooms) > KEPT:
            self._rooms.popitem(last=False)
        return made

    def clear(self) -> None:
        self._rooms.clear()
