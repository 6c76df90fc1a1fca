"""A sealed call's job closes its vendors' sockets with their close frames, and a vendor that
does not answer one never holds the job longer than ``VENDORS_CLOSE_S``
(``pinecall_worker.call.answer.close_vendors``; the whole call: ``test_call.py``)."""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import aiohttp
import pytest
from aiohttp import WSCloseCode, web
from livekit.plugins import cartesia

import pinecall_worker.call.answer

answering = sys.modules[pinecall_worker.call.answer.__module__]  # the package names the job

Events = tuple[asyncio.Event, asyncio.Event]


@asynccontextmanager
async def voice_socket(answers: bool) -> AsyncIterator[tuple[str, Events, list[int | None]]]:
    """A Cartesia-like ``/tts/websocket``: its base URL, (set once a socket is open, set once one
    ended) and the close code of each socket that ended. One that does not answer never reads,
    so never sees or answers a close frame (a vendor busy, a half-open connection)."""
    opened, ended, release = asyncio.Event(), asyncio.Event(), asyncio.Event()
    codes: list[int | None] = []

    async def handle(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        opened.set()
        if answers:
            async for _ in ws:
                pass
        else:
            await release.wait()
        codes.append(ws.close_code)
        ended.set()
        return ws

    app = web.Application()
    app.router.add_get("/tts/websocket", handle)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}", (opened, ended), codes
    finally:
        release.set()
        await runner.cleanup()


@pytest.mark.parametrize("answers", [True, False], ids=["answers", "silent"])
async def test_the_voices_pooled_socket_is_closed_and_a_silent_vendor_is_dropped_in_time(
    answers: bool, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(answering, "VENDORS_CLOSE_S", 0.3)
    async with (
        voice_socket(answers) as (url, (opened, ended), codes),
        aiohttp.ClientSession() as http,
    ):
        voice = cartesia.TTS(api_key="k", base_url=url, http_session=http)
        voice.prewarm()  # what a session's start does: the pool opens a socket
        async with asyncio.timeout(10):
            # the socket in the pool (livekit-agents' ConnectionPool keeps its prewarm's task)
            prewarming = voice._pool._prewarm_task()
            assert prewarming is not None
            await prewarming
            assert opened.is_set()
            with caplog.at_level(logging.WARNING, logger=answering.__name__):
                await answering.close_vendors([voice])
            if answers:
                await ended.wait()
    if answers:
        assert codes == [WSCloseCode.OK]  # closed with its close frame, at once
        assert "did not close" not in caplog.text
    else:  # dropped at the bound, where aiohttp alone waits 10 s for the close frame
        assert "Cartesia's sockets did not close in 0.3 s: dropped" in caplog.text


async def test_a_silent_vendor_does_not_keep_the_others_sockets_open(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Closed at once, each in its own bound: the voice that answers closes with its close frame
    though the one before it in the list never answers."""
    monkeypatch.setattr(answering, "VENDORS_CLOSE_S", 0.3)
    async with (
        voice_socket(answers=False) as (silent_url, _, _),
        voice_socket(answers=True) as (url, (_, ended), codes),
        aiohttp.ClientSession() as http,
    ):
        voices = [
            cartesia.TTS(api_key="k", base_url=u, http_session=http) for u in (silent_url, url)
        ]
        async with asyncio.timeout(10):
            for voice in voices:
                voice.prewarm()
                prewarming = voice._pool._prewarm_task()
                assert prewarming is not None
                await prewarming
            await answering.close_vendors(list(voices))
            await ended.wait()
    assert codes == [WSCloseCode.OK]
