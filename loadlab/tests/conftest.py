"""The LiveKit stand-in's fixtures (see `pinecall_loadlab.livekit.testing`)."""

from pinecall_loadlab.livekit.testing import *  # noqa: F403
