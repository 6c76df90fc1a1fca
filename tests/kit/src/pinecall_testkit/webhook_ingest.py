"""Test support: sign a webhook as LiveKit does, and run the app in the test's event loop."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib

from google.protobuf.json_format import MessageToJson
from livekit import api
from livekit.protocol.models import DisconnectReason, ParticipantInfo, Room
from livekit.protocol.webhook import WebhookEvent

SANDBOX_KEY, SANDBOX_SECRET = "sandbox-key", "sandbox-secret-of-at-least-32-characters"
"""A second LiveKit's keys, for the sandbox environment in tests."""


def sign(body: bytes, key: str, secret: str, ttl: dt.timedelta = dt.timedelta(minutes=5)) -> str:
    """The ``Authorization`` LiveKit sends: a JWT of ``key`` carrying the body's sha256."""
    digest = base64.b64encode(hashlib.sha256(body).digest()).decode()
    return api.AccessToken(key, secret).with_sha256(digest).with_ttl(ttl).to_jwt()


AGENT_NAME = "pinecall/worker-a.1791067258"
"""The worker :func:`agent_left`'s agent ran in (its ``lk.agent_name`` attribute)."""


def agent_left(event_id: str = "EV_agentleft1", room: str = "call-1") -> bytes:
    """A ``participant_left`` of an agent whose connection was lost, as protojson."""
    event = WebhookEvent(
        id=event_id,
        event="participant_left",
        created_at=1_796_000_000,
        room=Room(name=room, sid="RM_1"),
        participant=ParticipantInfo(
            identity="agent-AJ_1",
            kind=ParticipantInfo.Kind.AGENT,
            disconnect_reason=DisconnectReason.CONNECTION_TIMEOUT,
            attributes={"lk.agent_name": AGENT_NAME},
        ),
    )
    return MessageToJson(event, indent=None).encode()
