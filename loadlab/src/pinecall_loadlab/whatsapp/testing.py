"""pytest fixtures for the WhatsApp Cloud API fake.

    from pinecall_loadlab.whatsapp.testing import *  # noqa: F403

- `whatsapp_config` → `WhatsAppConfig` (port 0, retries 20 ms apart, no pair rate); override it
  in a test module;
- `whatsapp_fake` → a started `WhatsAppFake` (no webhook URL until the test sets one), closed
  after the test.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from .config import WhatsAppConfig
from .server import WhatsAppFake

__all__ = ["whatsapp_config", "whatsapp_fake"]


@pytest.fixture
def whatsapp_config() -> WhatsAppConfig:
    return WhatsAppConfig(port=0, retry_min_s=0.02, retry_max_s=0.2, pair_interval_s=0.0)


@pytest.fixture
async def whatsapp_fake(whatsapp_config: WhatsAppConfig) -> AsyncIterator[WhatsAppFake]:
    async with WhatsAppFake(whatsapp_config) as fake:
        yield fake
