"""Verifying a webhook and naming why one is refused, as pure functions of the request.

LiveKit signs a webhook with a JWT in ``Authorization`` (no ``Bearer``) whose ``sha256`` claim is
the base64 SHA-256 of the exact body bytes (livekit/protocol ``webhook/notifier.go``; livekit-api
``webhook.py``), so the body is verified as received, never re-serialized. A proxy may add a
``Bearer `` prefix; it is tolerated. The token's times (``exp``, ``nbf``, ``iat``) are read with
:data:`CLOCK_SKEW` of leeway, the skew LiveKit itself allows.
"""

from __future__ import annotations

import datetime as dt
from typing import Final, Literal

import jwt
from google.protobuf.json_format import MessageToDict
from livekit.api import TokenVerifier, WebhookReceiver
from livekit.protocol.models import ParticipantInfo
from livekit.protocol.webhook import WebhookEvent

from pinecall_contracts.livekit import LiveKitEvent

Refusal = Literal[
    "unsigned",
    "malformed_token",
    "forged",
    "expired",
    "not_yet_valid",
    "hash_mismatch",
    "no_hash",
    "not_utf8",
    "unknown_key",
]
"""Why a webhook was refused: the label of ``pinecall_webhooks_refused_total``."""

CLOCK_SKEW: Final = dt.timedelta(seconds=60)
"""How far LiveKit's clock and ours may differ: a token expired, or not valid yet, by up to this
much still verifies (PyJWT's ``leeway``, passed through livekit-api's ``TokenVerifier``). It is
what LiveKit allows its own tokens: its verifier checks claims with go-jose's ``Validate``, whose
default leeway is one minute."""


class WebhookRefused(Exception):
    """A webhook whose signature does not hold; ``reason`` is a :data:`Refusal`."""

    def __init__(self, reason: Refusal, detail: str) -> None:
        super().__init__(detail)
        self.reason: Refusal = reason


def token_of(authorization: str | None) -> str:
    """The JWT of an ``Authorization`` header, with or without ``Bearer ``."""
    if not authorization or not authorization.strip():
        raise WebhookRefused("unsigned", "no Authorization header")
    token = authorization.strip()
    if token.lower().startswith("bearer "):
        token = token[7:].strip()
    return token


def verify(body: bytes, authorization: str | None, key: str, secret: str) -> WebhookEvent:
    """The event ``body`` carries, if ``authorization`` signs exactly these bytes with ``key``.

    Raises :class:`WebhookRefused`: unsigned, malformed_token, unknown_key (another API key),
    forged (wrong secret), expired or not_yet_valid (beyond :data:`CLOCK_SKEW`), no_hash,
    hash_mismatch, not_utf8.
    """
    token = token_of(authorization)
    try:
        issuer = jwt.decode(token, options={"verify_signature": False}).get("iss")
    except jwt.DecodeError as exc:
        raise WebhookRefused("malformed_token", "the Authorization token is not a JWT") from exc
    if issuer != key:
        raise WebhookRefused("unknown_key", f"signed by an unknown API key {issuer!r}")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise WebhookRefused("not_utf8", "the body is not UTF-8") from exc
    try:
        return WebhookReceiver(TokenVerifier(key, secret, leeway=CLOCK_SKEW)).receive(text, token)
    except jwt.ExpiredSignatureError as exc:
        raise WebhookRefused(
            "expired", f"the token has expired (more than {CLOCK_SKEW.seconds} s ago)"
        ) from exc
    except jwt.ImmatureSignatureError as exc:
        raise WebhookRefused(
            "not_yet_valid",
            f"the token is not valid for more than {CLOCK_SKEW.seconds} s yet: "
            "LiveKit's clock is ahead of ours",
        ) from exc
    except jwt.InvalidSignatureError as exc:
        raise WebhookRefused("forged", "the token's signature does not verify") from exc
    except jwt.PyJWTError as exc:
        raise WebhookRefused("malformed_token", f"the token does not verify: {exc}") from exc
    except Exception as exc:  # livekit-api raises a bare Exception for both of these
        if "sha256" in str(exc):
            raise WebhookRefused("no_hash", "the token carries no sha256 of the body") from exc
        if "hash mismatch" in str(exc):
            raise WebhookRefused("hash_mismatch", "the body is not the one signed") from exc
        raise


def to_contract(event: WebhookEvent, environment: str, body: bytes) -> LiveKitEvent:
    """``event`` as the contract: every fact a consumer reads lifted out of LiveKit's protobuf
    (the room's name and sid; the participant's identity, kind, attributes and, on
    ``participant_left``, why it left), and the body as received. webhook-ingest is the one
    reader of a webhook's body: a consumer reads these fields."""
    participant = event.participant if event.HasField("participant") else None
    reason = None
    if event.event == "participant_left" and participant is not None:
        reason = MessageToDict(participant).get("disconnectReason", "UNKNOWN_REASON")
    room = event.room if event.HasField("room") else None
    attributes = dict(participant.attributes) if participant is not None else {}
    return LiveKitEvent(
        id=event.id,
        environment=environment,
        event=event.event,
        created_at=int(event.created_at),
        room=(room.name or None) if room is not None else None,
        participant=participant.identity if participant else None,
        participant_kind=ParticipantInfo.Kind.Name(participant.kind) if participant else None,
        disconnect_reason=reason,
        body=body.decode("utf-8"),
        room_sid=(room.sid or None) if room is not None else None,
        participant_attributes=attributes,
    )
