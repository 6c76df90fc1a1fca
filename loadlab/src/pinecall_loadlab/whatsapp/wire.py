"""Meta's WhatsApp Cloud API wire, as plain functions: webhook bodies, their signature, the
messages endpoint's answers. Sources: ``shared/reference/app-socket.md`` §2 (DOC WA-MSG,
WA-ST, WA-ERR, WA-SDK, WA-TP) and Meta's public SDK types quoted there.

- A webhook: ``{"object": "whatsapp_business_account", "entry": [{"id": <WABA id>,
  "changes": [{"field": "messages", "value": {"messaging_product": "whatsapp", "metadata":
  {"display_phone_number", "phone_number_id"}, …}}]}]}`` with ``value.contacts`` +
  ``value.messages`` for an inbound message, ``value.statuses`` for a status. Timestamps are
  whole Unix seconds, as strings.
- Its signature: ``X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the raw body, keyed by the
  App Secret>``.
- ``POST /{version}/{phone_number_id}/messages`` → 200 ``{"messaging_product": "whatsapp",
  "contacts": [{"input", "wa_id"}], "messages": [{"id": "wamid.…"}]}``; a refusal is Graph's
  ``{"error": {"message", "type", "code", "error_data": {"messaging_product", "details"},
  "fbtrace_id"}}``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from typing import Any, Literal

Status = Literal["sent", "delivered", "read", "failed"]

RE_ENGAGEMENT = 131047
"""Free text outside the contact's 24-hour customer-service window."""
PAIR_RATE = 131056
"""Too many messages to one contact from one number, too fast."""
INVALID_PARAMETER = 100
ACCESS_TOKEN = 190

ERRORS: dict[int, tuple[str, str]] = {
    RE_ENGAGEMENT: (
        "(#131047) Re-engagement message",
        "Message failed to send because more than 24 hours have passed since the customer "
        "last replied to this number.",
    ),
    PAIR_RATE: (
        "(#131056) (Business Account, Consumer Account) pair rate limit hit",
        "Too many messages sent from the sender phone number to the same recipient phone "
        "number in a short period of time.",
    ),
    ACCESS_TOKEN: ("Invalid OAuth access token - Cannot parse access token", ""),
}


def wamid() -> str:
    """A new message id, ``wamid.`` and base64 as Meta's look."""
    return "wamid." + base64.b64encode(secrets.token_bytes(30)).decode()


def signature(app_secret: str, body: bytes) -> str:
    """The ``X-Hub-Signature-256`` header's value for ``body`` (its raw bytes)."""
    digest = hmac.new(app_secret.encode(), body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


def encode(payload: dict[str, Any]) -> bytes:
    """A webhook body as Meta sends it: compact JSON, non-ASCII as ``\\uXXXX`` escapes."""
    return json.dumps(payload, separators=(",", ":")).encode()


def _envelope(waba_id: str, number: str, display: str, value: dict[str, Any]) -> dict[str, Any]:
    metadata = {"display_phone_number": display, "phone_number_id": number}
    value = {"messaging_product": "whatsapp", "metadata": metadata, **value}
    return {
        "object": "whatsapp_business_account",
        "entry": [{"id": waba_id, "changes": [{"field": "messages", "value": value}]}],
    }


def message_webhook(
    *,
    waba_id: str,
    number: str,
    display: str,
    wa_id: str,
    name: str,
    message_id: str,
    text: str,
    timestamp: int,
) -> dict[str, Any]:
    """An inbound text message from contact ``wa_id`` to business number ``number``."""
    value = {
        "contacts": [{"profile": {"name": name}, "wa_id": wa_id}],
        "messages": [
            {
                "from": wa_id,
                "id": message_id,
                "timestamp": str(timestamp),
                "type": "text",
                "text": {"body": text},
            }
        ],
    }
    return _envelope(waba_id, number, display, value)


def status_webhook(
    *,
    waba_id: str,
    number: str,
    display: str,
    message_id: str,
    recipient: str,
    status: Status,
    timestamp: int,
    error: int | None = None,
) -> dict[str, Any]:
    """A status of an outbound message; ``failed`` carries ``errors[]`` with ``error``'s code."""
    item: dict[str, Any] = {
        "id": message_id,
        "status": status,
        "timestamp": str(timestamp),
        "recipient_id": recipient,
    }
    if status != "failed":
        item["conversation"] = {"id": secrets.token_hex(16), "origin": {"type": "service"}}
        item["pricing"] = {"billable": True, "pricing_model": "CBP", "category": "service"}
    else:
        title, details = ERRORS.get(error or 131000, ("Something went wrong", ""))
        item["errors"] = [
            {"code": error or 131000, "title": title, "message": title,
             "error_data": {"details": details}},
        ]  # fmt: skip
    return _envelope(waba_id, number, display, {"statuses": [item]})


def sent(to: str, message_id: str) -> dict[str, Any]:
    """The messages endpoint's 200."""
    return {
        "messaging_product": "whatsapp",
        "contacts": [{"input": to, "wa_id": to}],
        "messages": [{"id": message_id}],
    }


def error(code: int, message: str | None = None, details: str | None = None) -> dict[str, Any]:
    """A Graph API error body (``OAuthException``, as Meta types the Cloud API's)."""
    said, detail = ERRORS.get(code, (f"(#{code}) Invalid parameter", ""))
    return {
        "error": {
            "message": message or said,
            "type": "OAuthException",
            "code": code,
            "error_data": {"messaging_product": "whatsapp", "details": details or detail},
            "fbtrace_id": secrets.token_urlsafe(16),
        }
    }
