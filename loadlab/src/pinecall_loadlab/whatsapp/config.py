"""What the WhatsApp Cloud API fake does: its app's secrets, where it delivers webhooks, how it
retries them, and the rules of Meta's it enforces (the 24-hour window, the pair rate).

Plain data (a frozen msgspec Struct), read from a JSON or TOML file by `load_config` or built by
``pinecall-runtime lab whatsapp`` from its flags. Seconds throughout.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import msgspec

DEFAULT_PORT = 7895
"""Where ``lab whatsapp`` and `WhatsAppConfig` listen unless told otherwise."""

GRAPH_VERSION = "v21.0"
"""The Graph API version the fake says it is; any ``v<N>.<M>`` is served."""

Seconds = Annotated[float, msgspec.Meta(ge=0)]
Digits = Annotated[str, msgspec.Meta(pattern=r"^[0-9]{5,20}$(?![\s\S])")]


class WhatsAppConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One Meta app with its business numbers, on `host`:`port` (0 picks a free one)."""

    host: str = "127.0.0.1"
    port: Annotated[int, msgspec.Meta(ge=0, le=65535)] = DEFAULT_PORT
    app_secret: Annotated[str, msgspec.Meta(min_length=1)] = "lab-app-secret"
    """The App Secret: the key of every webhook's ``X-Hub-Signature-256`` HMAC."""
    access_token: Annotated[str, msgspec.Meta(min_length=1)] = "lab-access-token"
    """The Bearer token the messages endpoint takes (another: 401, Graph error 190)."""
    waba_id: Digits = "102290129340398"
    """The WhatsApp Business Account's id: each webhook's ``entry[].id``."""
    numbers: dict[str, str] = msgspec.field(
        default_factory=lambda: {"106540352242922": "15550783881"}
    )
    """Business numbers: phone_number_id → display_phone_number (digits)."""
    webhook_url: str | None = None
    """Where webhooks go (the app's callback URL); None: nowhere yet (`set_webhook_url`)."""
    retry_min_s: Seconds = 0.5
    """The first retry of an undelivered webhook waits this long, each next twice as long."""
    retry_max_s: Seconds = 30.0
    """The longest wait between retries."""
    in_flight: Annotated[int, msgspec.Meta(ge=1, le=1024)] = 1
    """Webhooks delivered at once: 1 sends them one at a time in the order queued; more send
    that many POSTs concurrently (no order between them, as Meta gives none), so a benchmark can
    offer a rate above one POST's round trip."""
    retry_for_s: Seconds = 600.0
    """A webhook undelivered this long is given up (Meta keeps trying for days; the lab
    does not)."""
    window_s: Annotated[float, msgspec.Meta(gt=0)] = 86_400.0
    """The customer-service window: free text to a contact only this long after its last
    message (Meta's 24 hours); past it the messages endpoint answers 131047."""
    pair_interval_s: Seconds = 6.0
    """Sends to one contact from one number closer than this are refused 131056 (Meta's pair
    rate, about one message every 6 s); 0: no pair rate."""


def load_config(path: Path) -> WhatsAppConfig:
    """Read a ``.json`` or ``.toml`` file shaped like `WhatsAppConfig`; `msgspec.ValidationError`
    names the bad or unknown field."""
    data = path.read_bytes()
    if path.suffix == ".toml":
        return msgspec.toml.decode(data, type=WhatsAppConfig)
    return msgspec.json.decode(data, type=WhatsAppConfig)
