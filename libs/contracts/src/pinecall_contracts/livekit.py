"""LiveKit's webhooks as the runtime passes them on (``shared/reference/livekit-protocol.md`` §3).

webhook-ingest verifies each webhook and publishes it once on the LiveKit stream
(:attr:`pinecall_contracts.subjects.Subjects.livekit_stream_settings`); the dispatcher reads it.
Everything a consumer reads is lifted out by webhook-ingest into fields of :class:`LiveKitEvent`,
so a consumer reads this type and never LiveKit's: webhook-ingest is the one reader of a webhook's
body. ``body`` stays on the wire as it was (contracts only grow), read by nobody.

A webhook webhook-ingest does not pass on is a :class:`WebhookDropped` on the drops stream
(``<ns>_webhook_drops``, kept ten minutes), which ``doctor`` counts by environment and reason.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated

import msgspec

from pinecall_contracts.base import Contract
from pinecall_contracts.ids import EnvironmentField


class LiveKitEvent(Contract, frozen=True, kw_only=True, tag="livekit.event.v1"):
    """One LiveKit webhook, verified, of one environment's LiveKit."""

    id: str
    """The webhook's id (LiveKit's ``EV_…``): the stream drops a second delivery of it."""
    environment: EnvironmentField
    event: str
    """``room_started``, ``room_finished``, ``participant_joined``, ``participant_left``, …"""
    created_at: int
    """When LiveKit made the event, Unix seconds."""
    room: str | None = None
    participant: str | None = None
    """The participant's identity."""
    participant_kind: str | None = None
    """``STANDARD``, ``SIP``, ``AGENT``, ``INGRESS``, ``EGRESS`` (LiveKit's ``ParticipantInfo.Kind``)."""
    disconnect_reason: str | None = None
    """On ``participant_left``: ``CLIENT_INITIATED``, ``CONNECTION_TIMEOUT``, ``ROOM_DELETED``, …"""
    body: str
    """The webhook's body as LiveKit sent it (protojson). Kept for compatibility; no consumer
    reads it (every fact one needs is a field here)."""
    room_sid: str | None = None
    """The room's sid (LiveKit's ``RM_…``): tells this room from an earlier one of the same name.
    None when the webhook names none (and on an event of an older webhook-ingest)."""
    participant_attributes: dict[str, str] = {}
    """The participant's attributes: an agent's ``lk.agent_name`` (its worker's name), a phone
    caller's ``sip.phoneNumber`` (LiveKit SIP's). Empty when it has none, or on an event of an
    older webhook-ingest."""


DropReason = Annotated[str, msgspec.Meta(pattern=r"^[a-z][a-z0-9_]{0,31}$(?![\s\S])")]
"""Why a webhook was not passed on: a refusal of its signature (``unsigned``,
``malformed_token``, ``forged``, ``expired``, ``not_yet_valid``, ``hash_mismatch``, ``no_hash``, ``not_utf8``,
``unknown_key``), a signed body that is no webhook (``not_a_webhook``), an environment with no
LiveKit (``unknown_environment``) or none named (``no_environment``), or a second delivery of one
already stored (``duplicate``)."""


class WebhookDropped(Contract, frozen=True, kw_only=True, tag="livekit.webhook_dropped.v1"):
    """A webhook webhook-ingest did not pass on, said on the drops stream
    (``<ns>.webhooks.dropped.<environment>.<reason>``): the ten minutes the stream keeps are the
    intake health ``doctor`` reads, since a dropped webhook leaves no other record."""

    environment: Annotated[str, msgspec.Meta(max_length=64)]
    """The environment the webhook's URL named (``?world=``); ``_unknown`` for one with no
    LiveKit, or none named."""
    reason: DropReason
    at: dt.datetime
    detail: Annotated[str, msgspec.Meta(max_length=500)] = ""
    """What the refusal said (``signed by an unknown API key 'APIxyz'``)."""
