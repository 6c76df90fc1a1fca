"""What :mod:`pinecall_clients.livekit` takes (a LiveKit's access) and gives: its own small
types of LiveKit's answers, with LiveKit's enum names as strings."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass

from livekit import api


@dataclass(frozen=True, slots=True, kw_only=True)
class LiveKitAccess:
    """A LiveKit's URL (``http(s)://`` or ``ws(s)://``), an API key and its secret."""

    url: str
    api_key: str
    api_secret: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Room:
    """A room as ListRooms gives it."""

    name: str
    sid: str
    created_at: dt.datetime
    """When LiveKit made it (UTC; its ``creation_time_ms``, else ``creation_time``)."""
    participants: int
    """How many participants LiveKit counts in it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Participant:
    """Someone in a room as ListParticipants gives them."""

    identity: str
    kind: str
    """LiveKit's ``ParticipantInfo.Kind`` name: ``STANDARD``, ``SIP``, ``AGENT``, …"""
    attributes: Mapping[str, str]


@dataclass(frozen=True, slots=True, kw_only=True)
class Dispatch:
    """An agent dispatch of a room as ListDispatch gives it."""

    id: str
    agent_name: str
    metadata: str
    created_at_ns: int
    """When LiveKit made it, Unix nanoseconds (its ``state.created_at``)."""
    jobs: int
    """How many jobs LiveKit made of it so far (0: no worker has taken it)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Trunk:
    """A SIP outbound trunk as ListSIPOutboundTrunk gives it."""

    id: str
    """Its ``sip_trunk_id`` (``ST_…``)."""
    name: str
    numbers: tuple[str, ...]
    """The numbers it calls from."""


def kind_name(kind: int) -> str:
    """LiveKit's name of a participant's kind (``ParticipantInfo.Kind``): ``SIP``, ``AGENT``, …"""
    return str(api.ParticipantInfo.Kind.Name(kind))


def created(room: api.Room) -> dt.datetime:
    """When LiveKit made ``room`` (UTC)."""
    seconds = room.creation_time_ms / 1000 if room.creation_time_ms else room.creation_time
    return dt.datetime.fromtimestamp(seconds, dt.UTC)
