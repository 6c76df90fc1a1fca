"""The LiveKit stand-in: LiveKit's agent WebSocket, Twirp APIs, webhooks and dispatcher on
loopback, plus lab rooms carrying presence and PCM audio without an SFU. Lab and test
infrastructure only; production code never imports it."""

from .config import StandInConfig
from .policy import AffinityFormula
from .server import StandIn

__all__ = ["AffinityFormula", "StandIn", "StandInConfig"]
