"""Meta's webhook as the chat service reads it, and the WhatsApp rules, as pure functions.

Sources: ``shared/reference/app-socket.md`` §2 (DOC WA-MSG, WA-ST, WA-SDK, WA-TP; 3P 360,
AWS-WA, RL), seed 002 ("A written call").

- **Signature**: ``X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the raw body keyed by the App
  Secret>``, compared in constant time over the bytes as received (re-serialised JSON would
  differ on emoji and accents).
- **Body**: ``{"object": "whatsapp_business_account", "entry": [{"id", "changes": [{"field":
  "messages", "value": {"metadata": {"phone_number_id", …}, "contacts"?, "messages"?,
  "statuses"?}}]}]}``. Fields this service does not read are ignored (Meta adds them); a body
  without that skeleton is refused (400) before anything is looked up.
- **Threads**: a contact's thread with a number is one written call at a time; its id is made
  from the number, the contact and the thread's ordinal (:func:`thread_call`), so any replica,
  after any restart, finds the contact's open call without a read of its own.
- **The window**: free text to a contact only within ``window_s`` (24 h) of its latest message.
- **The pair rate**: one message to a contact every ``pair_interval_s`` (about 6 s).
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Literal

import msgspec

MAX_BODY_BYTES = 3 * 1024 * 1024
"""The largest webhook body taken, in bytes (Meta's payloads go up to 3 MB, 3P HD); more: 413."""
WINDOW_S = 86_400.0
"""Meta's customer-service window, in seconds (24 h)."""
PAIR_INTERVAL_S = 6.0
"""Meta's pair rate: about one message to one contact every 6 s (131056 past it)."""


class Text(msgspec.Struct, frozen=True):
    body: str


class Message(msgspec.Struct, frozen=True, rename={"from_": "from"}):
    """An inbound message; only text is answered (another type is written as said, no text)."""

    from_: str
    id: str
    timestamp: str
    type: str = "text"
    text: Text | None = None


class StatusError(msgspec.Struct, frozen=True):
    code: int
    title: str = ""


class Status(msgspec.Struct, frozen=True):
    id: str
    status: str
    timestamp: str
    recipient_id: str
    errors: list[StatusError] = []


class Metadata(msgspec.Struct, frozen=True):
    phone_number_id: str
    display_phone_number: str = ""


class Value(msgspec.Struct, frozen=True):
    metadata: Metadata
    messages: list[Message] = []
    statuses: list[Status] = []


class Change(msgspec.Struct, frozen=True):
    field: str
    value: Value


class WabaEntry(msgspec.Struct, frozen=True):
    id: str
    changes: list[Change] = []


class Notification(msgspec.Struct, frozen=True):
    """One webhook body."""

    object: Literal["whatsapp_business_account"]
    entry: list[WabaEntry]

    def numbers(self) -> list[str]:
        """The business numbers it is about, in order, each once."""
        seen: dict[str, None] = {}
        for entry in self.entry:
            for change in entry.changes:
                seen[change.value.metadata.phone_number_id] = None
        return list(seen)


def parse(body: bytes) -> Notification:
    """``body`` as a :class:`Notification`; ``msgspec.DecodeError`` / ``ValidationError`` for one
    that is not Meta's webhook."""
    return msgspec.json.decode(body, type=Notification)


def signed(app_secret: str, body: bytes, header: str | None) -> bool:
    """Whether ``header`` is the ``X-Hub-Signature-256`` of ``body`` under ``app_secret``."""
    if header is None or not header.startswith("sha256="):
        return False
    expected = hmac.new(app_secret.encode(), body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, header.removeprefix("sha256=").lower())


def thread_call(number: str, contact: str, ordinal: int) -> str:
    """The call id of ``contact``'s ``ordinal``-th thread (1, 2, …) with business number
    ``number``: ``wa:<number>:<contact>:<ordinal>`` (a call id's grammar)."""
    return f"wa:{number}:{contact}:{ordinal}"


def window_open(last_inbound_s: float, now_s: float, window_s: float = WINDOW_S) -> bool:
    """Whether free text may still go to a contact whose latest message was at
    ``last_inbound_s`` (Unix seconds)."""
    return now_s - last_inbound_s <= window_s


def send_at(last_sent_s: float | None, now_s: float, interval_s: float = PAIR_INTERVAL_S) -> float:
    """When the next message to a contact may go, keeping the pair rate (monotonic seconds)."""
    return now_s if last_sent_s is None else max(now_s, last_sent_s + interval_s)
