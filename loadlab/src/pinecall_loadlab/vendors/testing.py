"""pytest fixtures for the vendor fakes, and the real plugins pointed at them.

    from pinecall_loadlab.vendors.testing import *  # noqa: F403

- `vendors_config` → `VendorsConfig` (port 0, short latencies); override it in a test module;
- `vendor_fakes` → a started `VendorFakes`, closed after the test;
- `http_session` → an aiohttp session for the plugins (outside a job there is no
  livekit-agents http context), closed after the test;
- `lab_plugins` → `LabPlugins.make(vendor_fakes, http_session)`, closed after the test: the
  unmodified livekit-plugins (deepgram STT,
  anthropic LLM, cartesia TTS) with dummy keys and ``base_url`` at the fakes.

Needs loadlab's ``testing`` extra (the plugins).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import aiohttp
import pytest
from livekit.agents import APIConnectOptions
from livekit.plugins import anthropic, cartesia, deepgram

from .config import AnthropicConfig, CartesiaConfig, DeepgramConfig, VendorsConfig
from .server import VendorFakes

__all__ = ["FAST", "LabPlugins", "http_session", "lab_plugins", "vendor_fakes", "vendors_config"]

FAST = APIConnectOptions(max_retry=2, retry_interval=0.05, timeout=1.0)
"""Connection options for fault tests: 3 attempts, 50 ms apart, 1 s to give up on a stall."""


@dataclass
class LabPlugins:
    """The three vendor plugins, as a worker builds them, pointed at the fakes."""

    stt: deepgram.STT
    llm: anthropic.LLM
    tts: cartesia.TTS

    @classmethod
    def make(cls, fakes: VendorFakes, session: aiohttp.ClientSession) -> LabPlugins:
        return cls(
            stt=deepgram.STT(
                base_url=fakes.deepgram_url, api_key="lab", http_session=session, tags=["lab"]
            ),
            llm=anthropic.LLM(
                base_url=fakes.anthropic_url, api_key="lab", model="claude-haiku-4-5"
            ),
            tts=cartesia.TTS(base_url=fakes.cartesia_url, api_key="lab", http_session=session),
        )

    async def aclose(self) -> None:
        """Close what the plugins opened. The anthropic plugin's LLM never closes the SDK client
        it builds (livekit-plugins-anthropic 1.8.9 ``llm.py`` L134-146, no ``aclose``), so its
        pooled sockets would leak past the test; this closes it."""
        await self.tts.aclose()
        await self.llm.aclose()
        await self.llm._client.close()


@pytest.fixture
def vendors_config() -> VendorsConfig:
    """Port 0 and latencies short enough for tests (the defaults are a real vendor's)."""
    return VendorsConfig(
        port=0,
        deepgram=DeepgramConfig(first_s=0.05),
        anthropic=AnthropicConfig(first_s=0.05, chunk_s=0.005),
        cartesia=CartesiaConfig(first_s=0.05, chunk_s=0.005),
    )


@pytest.fixture
async def vendor_fakes(vendors_config: VendorsConfig) -> AsyncIterator[VendorFakes]:
    async with VendorFakes(vendors_config) as fakes:
        yield fakes


@pytest.fixture
async def http_session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


@pytest.fixture
async def lab_plugins(
    vendor_fakes: VendorFakes, http_session: aiohttp.ClientSession
) -> AsyncIterator[LabPlugins]:
    plugins = LabPlugins.make(vendor_fakes, http_session)
    yield plugins
    await plugins.aclose()
