"""API keys and the JWTs LiveKit reads and writes.

Reads: every request carries an HS256 JWT whose ``iss`` names an API key; it is verified with that
key's secret by livekit-api's `TokenVerifier` (`LK:pkg/service/auth.go:L63-117`). Writes: the
agent token of a `JobAssignment` (`PR:agent/token.go`, 1 h) and the webhook token
(`PR:auth/accesstoken.go`, 5 min, ``sha256`` claim, no ``sub``/``video``). Errors: `AuthError`
(the server's plain-text 401).
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import time
from collections.abc import Mapping

import jwt
from livekit import api
from livekit.protocol import models

AGENT_TOKEN_TTL = datetime.timedelta(hours=1)
WEBHOOK_TOKEN_TTL_S = 300
AGENT_NAME_ATTRIBUTE = "lk.agent_name"
"""Set by the server on every agent token (`LK:pkg/agent/worker.go:L48`)."""


class AuthError(Exception):
    """The token is missing, malformed, of an unknown key, badly signed or expired (HTTP 401)."""


class KeyRing:
    """The stand-in's API keys: ``{api_key: secret}``; the first key signs webhooks."""

    def __init__(self, keys: Mapping[str, str]) -> None:
        if not keys:
            raise ValueError("at least one API key is needed")
        self._keys = dict(keys)

    @property
    def webhook_key(self) -> str:
        """The key webhooks are signed with (LiveKit's `webhook.api_key`)."""
        return next(iter(self._keys))

    def secret(self, api_key: str) -> str:
        """The secret of `api_key`; `AuthError` if the key is unknown."""
        try:
            return self._keys[api_key]
        except KeyError:
            raise AuthError("invalid API key") from None

    def verify(self, token: str) -> tuple[str, api.access_token.Claims]:
        """Verify `token` and return ``(api_key, claims)``; `AuthError` on any failure."""
        try:
            unverified = jwt.decode(token, options={"verify_signature": False})
            api_key = str(unverified.get("iss", ""))
            claims = api.TokenVerifier(api_key, self.secret(api_key)).verify(token)
        except AuthError:
            raise
        except Exception as exc:  # pyjwt's error tree and malformed payloads alike
            raise AuthError(f"invalid token: {exc}") from None
        return api_key, claims

    def mint_agent_token(
        self,
        api_key: str,
        *,
        room: str,
        identity: str,
        name: str,
        metadata: str,
        attributes: Mapping[str, str],
        permissions: models.ParticipantPermission,
        agent_name: str,
    ) -> str:
        """The agent's room token, as `protoagent.BuildAgentToken` mints it: HS256, 1 h, kind agent,
        grants from the worker's `allowed_permissions`, attributes plus ``lk.agent_name``."""
        grants = api.VideoGrants(
            room_join=True,
            agent=True,
            room=room,
            can_subscribe=permissions.can_subscribe,
            can_publish=permissions.can_publish,
            can_publish_data=permissions.can_publish_data,
            hidden=permissions.hidden,
            can_update_own_metadata=permissions.can_update_metadata,
            can_subscribe_metrics=permissions.can_subscribe_metrics,
        )
        attrs = {**attributes, AGENT_NAME_ATTRIBUTE: agent_name}
        return (
            api.AccessToken(api_key, self.secret(api_key))
            .with_identity(identity)
            .with_name(name)
            .with_kind("agent")
            .with_metadata(metadata)
            .with_attributes(attrs)
            .with_grants(grants)
            .with_ttl(AGENT_TOKEN_TTL)
            .to_jwt()
        )

    def mint_webhook_token(self, body: bytes) -> str:
        """The webhook's ``Authorization`` value (no ``Bearer``): iss, nbf, iat, exp (+5 min) and
        ``sha256 = base64(sha256(body))`` (`PR:webhook/resource_url_notifier.go:L358-392`)."""
        now = int(time.time())
        digest = base64.b64encode(hashlib.sha256(body).digest()).decode()
        claims = {
            "iss": self.webhook_key,
            "nbf": now,
            "iat": now,
            "exp": now + WEBHOOK_TOKEN_TTL_S,
            "sha256": digest,
        }
        return jwt.encode(claims, self.secret(self.webhook_key), algorithm="HS256")


def request_token(authorization: str | None, access_token: str | None) -> str | None:
    """The request's JWT: ``Authorization: Bearer …`` or else the ``access_token`` parameter; None
    when neither is given (the request then has no grants). `AuthError` for a header without the
    ``Bearer `` prefix (`LK:pkg/service/auth.go:L66-85`)."""
    if authorization:
        if not authorization.startswith("Bearer "):
            raise AuthError("invalid authorization header. Must start with Bearer ")
        return authorization[len("Bearer ") :]
    return access_token or None
