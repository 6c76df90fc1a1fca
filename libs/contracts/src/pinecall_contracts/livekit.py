"""LiveKit's webhooks as the runtime passes them on (``shared/reference/livekit-protocol.md`` §3).

webhook-ingest verifies each webhook and publishes it once on the LiveKit stream; the dispatcher,
call-log and the reaper read it. The routing facts are lifted out; ``body`` keeps LiveKit's own
protojson for whoever needs more (``livekit.protocol.webhook.WebhookEvent``).
"""

from __future__ import annotations

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
    """The webhook's body as LiveKit sent it (protojson)."""
