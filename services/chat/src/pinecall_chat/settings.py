"""The chat service's settings, read once from the environment in ``main.py``.

Each environment's fleet key (``PINECALL_FLEET_KEYS``, ``production=pck_…,sandbox=pck_…``) is
what the service opens, writes and runs tools of its written calls with on call-log, as a worker
of that environment does with its own; a chat token is signed with ``PINECALL_CHAT_TOKEN_SECRET``,
which every replica shares (any replica verifies a token another minted, with no read).
"""

from __future__ import annotations

from typing import Annotated, ClassVar

import msgspec

from pinecall_contracts.ids import ENVIRONMENTS
from pinecall_servicekit.settings import (
    HttpUrl,
    Port,
    Settings,
    SettingsError,
    by_environment,
)


class ChatSettings(Settings, frozen=True, kw_only=True):
    """Where the chat service listens, what it reaches, and the bounds of its socket."""

    ENV_NAMES: ClassVar = {"anthropic_api_key": "ANTHROPIC_API_KEY"}

    host: str = "127.0.0.1"
    port: Port = 8106
    call_log_url: HttpUrl = "http://127.0.0.1:8102"
    dispatcher_url: HttpUrl = "http://127.0.0.1:8103"
    """Where a written call is admitted (the org's ``concurrent_calls`` quota, as voice)."""
    service_key: str | None = None
    """``PINECALL_SERVICE_KEY``: the services' own key, for the admission of a written call."""
    fleet_keys: str = ""
    """``PINECALL_FLEET_KEYS``: ``production=pck_…,sandbox=pck_…``, each environment's fleet
    key, which opens, writes and runs the tools of that environment's written calls."""
    chat_token_secret: str = ""
    """``PINECALL_CHAT_TOKEN_SECRET``: signs the chat tokens; the same on every replica."""
    chat_token_ttl_s: Annotated[float, msgspec.Meta(gt=0, le=86_400)] = 900.0
    """Seconds a chat token is good for after it is minted (a page mints one per dial)."""
    chat_max_message_chars: Annotated[int, msgspec.Meta(ge=1, le=65_536)] = 4000
    """The longest visitor message, in characters (one more: close 4413, nothing written)."""
    chat_max_frame_bytes: Annotated[int, msgspec.Meta(ge=256, le=1_048_576)] = 32_768
    """The largest frame the page may send, in bytes (one more: close 1009)."""
    anthropic_url: str | None = None
    """``PINECALL_ANTHROPIC_URL``: the model's base URL (the lab's fake); None: Anthropic's."""
    anthropic_api_key: str | None = None
    model: str = "claude-haiku-4-5"
    """``PINECALL_MODEL``: the model of a call whose agent names none (as the worker's)."""
    key_cache_s: Annotated[float, msgspec.Meta(ge=0)] = 5.0
    whatsapp_graph_url: HttpUrl = "https://graph.facebook.com"
    """``PINECALL_WHATSAPP_GRAPH_URL``: Meta's Graph API, where replies are sent (the lab's
    fake: ``lab whatsapp``). The webhook reads its numbers' secrets with ``service_key``."""
    whatsapp_graph_version: Annotated[str, msgspec.Meta(pattern=r"^v[0-9]+\.[0-9]+$")] = "v21.0"
    whatsapp_pair_interval_s: Annotated[float, msgspec.Meta(ge=0, le=60)] = 6.0
    """Seconds between two replies to one WhatsApp contact (Meta's pair rate, about 6 s)."""
    whatsapp_window_s: Annotated[float, msgspec.Meta(gt=0)] = 86_400.0
    """Meta's customer-service window, in seconds: a waiting message whose contact wrote last
    longer ago than this is let go (24 h)."""
    whatsapp_ack_wait_s: Annotated[float, msgspec.Meta(gt=0, le=600)] = 30.0
    """Seconds a replica may hold a WhatsApp item without a word (it says ``in_progress`` every
    third of it while it works) before the stream gives it to another: a replica killed
    holding one has it answered this long after."""
    whatsapp_retry_s: Annotated[float, msgspec.Meta(gt=0, le=600)] = 2.0
    """Seconds before an item whose processing met a service unavailable is given again."""
    whatsapp_quota_retry_s: Annotated[float, msgspec.Meta(gt=0, le=3600)] = 10.0
    """Seconds before a message refused at its org's quota (it waits) is tried again."""
    app_announce_s: Annotated[float, msgspec.Meta(gt=0)] = 1.0
    """call-log's ``PINECALL_APP_ANNOUNCE_S``: an agent is held while a call-log replica said
    so within three of these."""

    def keys(self) -> dict[str, str]:
        """Each environment's fleet key; ``SettingsError`` for another environment's name."""
        keys = by_environment(self.fleet_keys, "PINECALL_FLEET_KEYS")
        if unknown := sorted(set(keys) - set(ENVIRONMENTS)):
            raise SettingsError(f"PINECALL_FLEET_KEYS: no environment {', '.join(unknown)}")
        return keys

    def check(self) -> ChatSettings:
        """These settings, or ``SettingsError`` naming what the chat service cannot run without."""
        if not self.keys():
            raise SettingsError(
                "the chat service needs PINECALL_FLEET_KEYS (production=<fleet key>,…): "
                "pinecall-runtime keys create --kind fleet"
            )
        if not self.chat_token_secret:
            raise SettingsError("the chat service needs PINECALL_CHAT_TOKEN_SECRET")
        return self
