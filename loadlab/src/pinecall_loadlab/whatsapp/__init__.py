"""Meta's WhatsApp Cloud API faked on its own wire: signed webhooks (inbound messages and
statuses) retried until delivered, twice or out of order on command, and the messages endpoint
with Meta's success and error shapes (the 24-hour window, the pair rate). Lab and test
infrastructure: production code never imports it."""

from .config import WhatsAppConfig, load_config
from .server import Contact, Sent, WhatsAppFake
from .webhooks import Delivery, WebhookFaults
from .wire import PAIR_RATE, RE_ENGAGEMENT, signature

__all__ = [
    "PAIR_RATE",
    "RE_ENGAGEMENT",
    "Contact",
    "Delivery",
    "Sent",
    "WebhookFaults",
    "WhatsAppConfig",
    "WhatsAppFake",
    "load_config",
    "signature",
]
