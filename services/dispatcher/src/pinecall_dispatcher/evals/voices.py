"""The simulated caller's voice and ears: the environment's own vendors, as its workers use them.

The voice is Cartesia (livekit-plugins-cartesia, as ``pinecall_worker.call.session.voice`` and
``pinecall_jobs.cartesia_voice`` make it), the ears Deepgram (livekit-plugins-deepgram, as the
worker's session hears a caller), each at the base URL and key the dispatcher is given
(``PINECALL_CARTESIA_URL``/``CARTESIA_API_KEY``, ``PINECALL_DEEPGRAM_URL``/``DEEPGRAM_API_KEY``):
under the lab, the vendor fakes. Both speak and hear 48 kHz mono, the lab room's rate and
WebRTC's, so no frame is resampled here. The plugins are given the caller's own aiohttp session
(outside a livekit-agents job there is no ``http_context``).

Errors: :class:`NoVoice` (503 ``evals_unavailable``) when a plugin refuses its settings (no API
key); a vendor that fails mid-call is livekit-agents' ``APIError``, which the caller turns into
an outcome.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import aiohttp
from livekit.plugins import cartesia, deepgram

from pinecall_dispatcher.settings import DispatcherSettings
from pinecall_servicekit.errors import Unavailable

P = TypeVar("P")
SAMPLE_RATE = 48000
"""The caller's audio, both ways (s16le mono): the lab room's and WebRTC's rate."""


class NoVoice(Unavailable):
    code = "evals_unavailable"


def _given(**kwargs: Any) -> dict[str, Any]:
    return {k: v for k, v in kwargs.items() if v is not None}


def voice(settings: DispatcherSettings, http: aiohttp.ClientSession) -> cartesia.TTS:
    """Cartesia at the environment's base URL, at :data:`SAMPLE_RATE`, its default voice (the
    caller is not the agent); :class:`NoVoice` without a key."""
    given = _given(base_url=settings.cartesia_url, api_key=settings.cartesia_api_key)
    return _made("voice", cartesia.TTS, given, http)


def ears(settings: DispatcherSettings, http: aiohttp.ClientSession) -> deepgram.STT:
    """Deepgram at the environment's base URL, hearing :data:`SAMPLE_RATE`; :class:`NoVoice`
    without a key."""
    given = _given(base_url=settings.deepgram_url, api_key=settings.deepgram_api_key)
    return _made("ears", deepgram.STT, given, http)


def _made(what: str, plugin: Callable[..., P], given: dict[str, Any], http: Any) -> P:
    try:
        return plugin(**given, sample_rate=SAMPLE_RATE, http_session=http)
    except ValueError as exc:  # the plugins' word for a key missing
        raise NoVoice(f"the simulated caller has no {what}: {exc}") from None


async def spoken(tts: cartesia.TTS, text: str) -> bytes:
    """``text`` said by ``tts``: s16le mono PCM at :data:`SAMPLE_RATE`."""
    pcm = bytearray()
    async with tts.synthesize(text) as stream:
        async for audio in stream:
            pcm += bytes(audio.frame.data)
    return bytes(pcm)
