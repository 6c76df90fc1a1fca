"""The LiveKit stand-in's and the vendor fakes' fixtures (see `pinecall_loadlab.livekit.testing`
and `pinecall_loadlab.vendors.testing`)."""

from pinecall_loadlab.livekit.testing import *  # noqa: F403
from pinecall_loadlab.scenarios.testing import *  # noqa: F403
from pinecall_loadlab.vendors.testing import *  # noqa: F403
