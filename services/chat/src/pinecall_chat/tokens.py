"""Chat tokens: minted by a page's server with its app key, verified by any replica with no read
(as call-log's log tokens, ``pinecall_call_log.stream``).

A chat token is ``<payload>.<signature>``: the payload is base64url JSON of :class:`Claims`
(``exp`` in Unix seconds), the signature HMAC-SHA256 of the payload with
``PINECALL_CHAT_TOKEN_SECRET``, which every replica shares.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time

import msgspec


class Claims(msgspec.Struct, frozen=True, kw_only=True):
    """What a chat token scopes: one agent of one org in one environment, and, when resuming,
    one call; ``visitor`` is the page's name for its visitor."""

    agent: str
    org: str
    environment: str
    call: str | None = None
    visitor: str = ""
    exp: int


class BadToken(ValueError):
    """Not a chat token, not signed by this secret, or expired (close 4401)."""


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _sign(secret: str, payload: str) -> bytes:
    return hmac.new(secret.encode(), payload.encode(), hashlib.sha256).digest()


def mint(secret: str, claims: Claims) -> str:
    """The token of ``claims`` (their ``exp`` already set)."""
    payload = _b64(msgspec.json.encode(claims))
    return f"{payload}.{_b64(_sign(secret, payload))}"


def expiry(ttl_s: float, now: float | None = None) -> int:
    """``exp`` for a token good for ``ttl_s`` seconds from ``now`` (Unix seconds)."""
    return int((now if now is not None else time.time()) + ttl_s)


def verify(secret: str, token: str | None, now: float | None = None) -> Claims:
    """The claims of a live chat token; ``BadToken`` otherwise, saying which: none given, one
    malformed (not ``<payload>.<signature>``), one not signed by ``secret``, one expired."""
    if not token:
        raise BadToken("no chat token: the page's server mints one (POST /v1/chat/tokens)")
    if not secret or token.count(".") != 1:  # no secret: nothing of ours could be this token
        raise BadToken("a malformed chat token: not one minted by POST /v1/chat/tokens")
    payload, signature = token.split(".")
    try:
        good = hmac.compare_digest(_unb64(signature), _sign(secret, payload))
        claims = msgspec.json.decode(_unb64(payload), type=Claims) if good else None
    except (ValueError, msgspec.MsgspecError):
        claims = None
    if claims is None:
        raise BadToken("an invalid chat token: not signed by this service (mint another)")
    if claims.exp < (now if now is not None else time.time()):
        raise BadToken("the chat token expired: mint another")
    return claims
