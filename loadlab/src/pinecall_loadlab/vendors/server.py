"""The vendor fakes as one loopback server.

    async with VendorFakes(VendorsConfig(port=0)) as fakes:
        deepgram.STT(base_url=fakes.deepgram_url, api_key="lab")
        anthropic.LLM(base_url=fakes.anthropic_url, api_key="lab")
        cartesia.TTS(base_url=fakes.cartesia_url, api_key="lab")
        fakes.deepgram.script("Can you tell me when my order will arrive?")
        fakes.anthropic.state.configure(first_s=1.2)
        fakes.cartesia.state.inject(Fault(kind="status", status=503))

Routes: ``/v1/listen`` (Deepgram), ``/v1/messages`` (Anthropic), ``/tts/websocket`` and
``/tts/bytes`` (Cartesia) — the vendors' own paths, so each plugin needs only its ``base_url``.
Stopping releases every stall and closes every socket.
"""

from __future__ import annotations

import asyncio
import logging
from types import TracebackType

from aiohttp import web

from pinecall_loadlab import serving

from .anthropic import AnthropicFake
from .cartesia import CartesiaFake
from .config import VendorsConfig
from .deepgram import DeepgramFake
from .state import VendorState

log = logging.getLogger(__name__)


class VendorFakes:
    """Deepgram, Anthropic and Cartesia on `config.host`:`config.port` (by default
    `DEFAULT_PORT`; 0 picks a free one) while open."""

    def __init__(self, config: VendorsConfig | None = None) -> None:
        self.config = config or VendorsConfig()
        self._stopping = asyncio.Event()
        self.deepgram = DeepgramFake(VendorState(self.config.deepgram, self._stopping))
        self.anthropic = AnthropicFake(VendorState(self.config.anthropic, self._stopping))
        self.cartesia = CartesiaFake(VendorState(self.config.cartesia, self._stopping))
        self.app = web.Application()
        self.app.router.add_get("/v1/listen", self.deepgram.handle)
        self.app.router.add_post("/v1/messages", self.anthropic.handle)
        self.app.router.add_get("/tts/websocket", self.cartesia.handle_ws)
        self.app.router.add_post("/tts/bytes", self.cartesia.handle_bytes)
        self._runner: web.AppRunner | None = None
        self.port = self.config.port

    @property
    def url(self) -> str:
        return f"http://{self.config.host}:{self.port}"

    @property
    def deepgram_url(self) -> str:
        """livekit-plugins-deepgram's ``base_url`` (it swaps http for ws itself)."""
        return f"{self.url}/v1/listen"

    @property
    def anthropic_url(self) -> str:
        """livekit-plugins-anthropic's ``base_url`` (the SDK appends ``/v1/messages``)."""
        return self.url

    @property
    def cartesia_url(self) -> str:
        """livekit-plugins-cartesia's ``base_url`` (it appends ``/tts/…``)."""
        return self.url

    async def start(self) -> None:
        """Listen; with port 0 the chosen port is in `port`."""
        self._runner = web.AppRunner(self.app, handle_signals=False, shutdown_timeout=1.0)
        await self._runner.setup()
        await web.TCPSite(self._runner, self.config.host, self.config.port).start()
        self.port = self._runner.addresses[0][1]
        log.info("vendor fakes listening on %s", self.url)

    async def aclose(self) -> None:
        """Release stalls, close sockets, stop."""
        self._stopping.set()
        for state in (self.deepgram.state, self.cartesia.state):
            for ws in list(state.sockets):
                await ws.close()
        if self._runner is not None:
            await serving.stop(self._runner)

    async def __aenter__(self) -> VendorFakes:
        await self.start()
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()
