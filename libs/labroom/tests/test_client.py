"""The lab-room client against a scripted loopback server (the stand-in is tested in loadlab)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from pinecall_labroom import LabRoom, lab_url


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://127.0.0.1:7880", "ws://127.0.0.1:7880/lab/rtc"),
        ("https://lk.example/base/", "wss://lk.example/base/lab/rtc"),
        ("ws://h:1", "ws://h:1/lab/rtc"),
    ],
)
def test_lab_url(url: str, expected: str) -> None:
    assert lab_url(url) == expected


@pytest.fixture
async def scripted() -> AsyncIterator[tuple[str, list[object]]]:
    """A server that joins anyone, echoes audio back as from "echo" and records what it got."""
    got: list[object] = []

    async def handle(request: web.Request) -> web.StreamResponse:
        got.append(request.headers["Authorization"])
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        me = {"identity": "me", "sid": "PA_1", "name": "", "kind": "STANDARD", "attributes": {}}
        await ws.send_str(
            json.dumps(
                {
                    "type": "joined",
                    "room": {"name": "r", "sid": "RM_1"},
                    "participant": me,
                    "participants": [],
                    "sample_rate": 48000,
                    "channels": 1,
                }
            )
        )
        async for msg in ws:
            if msg.type == web.WSMsgType.BINARY:
                await ws.send_bytes(bytes([4]) + b"echo" + msg.data)
            else:
                got.append(json.loads(msg.data))
                await ws.close()
        return ws

    app = web.Application()
    app.router.add_get("/lab/rtc", handle)
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    yield f"http://127.0.0.1:{port}", got
    await runner.cleanup()


async def test_join_send_receive_and_leave(scripted: tuple[str, list[object]]) -> None:
    url, got = scripted
    room = await LabRoom.connect(url, "tok")
    assert (room.room, room.identity, room.sample_rate) == ("r", "me", 48000)
    await room.send(b"\x01\x00" * 960)
    async with asyncio.timeout(10):
        chunk = await room.audio.get()
        await room.leave()
    assert (chunk.sender, chunk.pcm) == ("echo", b"\x01\x00" * 960)
    assert got == ["Bearer tok", {"type": "leave"}]
