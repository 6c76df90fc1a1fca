"""The vendors on their own wire: Deepgram (live speech to text), Anthropic (Messages, streamed)
and Cartesia (streaming text to speech), faked on one loopback server so the real
livekit-plugins run unmodified against them, with latencies and faults set per vendor.
Lab and test infrastructure: production code never imports it."""

from .anthropic import Reply, ToolUse
from .config import Fault, VendorConfig, VendorsConfig, load_config
from .server import VendorFakes

__all__ = [
    "Fault",
    "Reply",
    "ToolUse",
    "VendorConfig",
    "VendorFakes",
    "VendorsConfig",
    "load_config",
]
