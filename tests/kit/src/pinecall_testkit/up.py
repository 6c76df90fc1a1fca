"""What the tests of ``pinecall-runtime up`` share: the environment a run is started in. Used
only by tests."""

from __future__ import annotations

import os

from pinecall_servicekit.platform import Endpoints


def platform_env(platform: Endpoints) -> dict[str, str]:
    """This environment without its ``PINECALL_*``, on the test's Postgres and NATS."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINECALL_")}
    return env | {
        "PINECALL_DATABASE_URL": platform.database_url,
        "PINECALL_NATS_URL": platform.nats_url,
    }
