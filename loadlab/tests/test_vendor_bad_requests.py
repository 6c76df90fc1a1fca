"""Bad requests get the vendor's own answer — a 400 and a vendor-shaped error, never a 500, a
silent hang or a dropped connection — and cannot make a fake build unbounded audio."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import aiohttp
import pytest

from pinecall_loadlab.vendors import VendorFakes

CONTEXT = {
    "model_id": "sonic-2",
    "voice": {"mode": "id", "id": "lab"},
    "output_format": {"container": "raw", "encoding": "pcm_s16le", "sample_rate": 24000},
    "language": "en",
}


def context(cid: str, **changes: Any) -> dict[str, Any]:
    base = {"context_id": cid, "transcript": "Hello there.", "continue": False}
    return {**CONTEXT, **base, **changes}


async def events_until_done(ws: aiohttp.ClientWebSocketResponse, cid: str) -> list[dict[str, Any]]:
    """Every message for context `cid`, up to the one with ``done``."""
    out: list[dict[str, Any]] = []
    while True:
        msg = await ws.receive_json()
        if msg.get("context_id") == cid:
            out.append(msg)
            if msg.get("done"):
                return out


# -- Cartesia ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ({"transcript": "x" * 5001}, "longer than 5000"),
        ({"output_format": {**CONTEXT["output_format"], "sample_rate": 0}}, "sample_rate"),
        ({"output_format": {**CONTEXT["output_format"], "sample_rate": 10**9}}, "sample_rate"),
        ({"output_format": None}, "output_format"),
        ({"transcript": 5}, "transcript"),
    ],
)
async def test_cartesia_bytes_refuses_a_bad_request_with_400(
    vendor_fakes: VendorFakes,
    http_session: aiohttp.ClientSession,
    changes: dict[str, Any],
    why: str,
) -> None:
    body = {**CONTEXT, "transcript": "Hello there.", **changes}
    async with http_session.post(f"{vendor_fakes.cartesia_url}/tts/bytes", json=body) as resp:
        assert resp.status == 400
        assert why in (await resp.json())["message"]
    assert vendor_fakes.cartesia.state.attempts == 1


async def test_cartesia_bytes_refuses_a_body_that_is_not_a_json_object(
    vendor_fakes: VendorFakes, http_session: aiohttp.ClientSession
) -> None:
    for raw in (b"{nope", b"", b"[1, 2]"):
        async with http_session.post(f"{vendor_fakes.cartesia_url}/tts/bytes", data=raw) as resp:
            assert resp.status == 400
            assert (await resp.json())["title"] == "Bad Request"


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ({"transcript": "x" * 5001}, "longer than 5000"),
        ({"output_format": {**CONTEXT["output_format"], "sample_rate": 0}}, "sample_rate"),
        ({"output_format": None}, "output_format"),
    ],
)
async def test_cartesia_socket_answers_a_bad_context_with_an_error_event_and_stays_open(
    vendor_fakes: VendorFakes,
    http_session: aiohttp.ClientSession,
    caplog: pytest.LogCaptureFixture,
    changes: dict[str, Any],
    why: str,
) -> None:
    url = f"{vendor_fakes.cartesia_url}/tts/websocket"
    with caplog.at_level(logging.WARNING, logger="pinecall_loadlab.vendors.cartesia"):
        async with asyncio.timeout(20), http_session.ws_connect(url) as ws:
            await ws.send_json(context("bad", **changes))
            [error] = await events_until_done(ws, "bad")
            await ws.send_json(context("good", transcript="Hi."))
            good = await events_until_done(ws, "good")
    assert error["type"] == "error"
    assert (error["done"], error["status_code"]) == (True, 400)
    assert why in error["error"]
    assert why in caplog.text
    assert [m["type"] for m in good][-1] == "done"
    assert any(m["type"] == "chunk" for m in good)


async def test_cartesia_socket_answers_garbage_with_an_error_event_and_stays_open(
    vendor_fakes: VendorFakes, http_session: aiohttp.ClientSession
) -> None:
    url = f"{vendor_fakes.cartesia_url}/tts/websocket"
    async with asyncio.timeout(20), http_session.ws_connect(url) as ws:
        for garbage in ("not json", "[1, 2]", "5"):
            await ws.send_str(garbage)
            error = await ws.receive_json()
            assert (error["type"], error["done"], error["status_code"]) == ("error", True, 400)
        await ws.send_json(context("good", transcript="Hi."))
        good = await events_until_done(ws, "good")
    assert [m["type"] for m in good][-1] == "done"


async def test_cartesia_long_text_is_made_chunk_by_chunk(vendor_fakes: VendorFakes) -> None:
    """The audio of a context is made as it is sent: the first chunk of the longest allowed
    transcript is out before the rest exists (the fake's generator is lazy)."""
    from pinecall_loadlab.vendors.cartesia import speech_chunks, speech_like

    chunks = speech_chunks(2.0, 24000, 0.1)
    first = next(chunks)
    assert len(first) == 2400 * 2
    assert first + b"".join(chunks) == speech_like(2.0, 24000)


# -- Deepgram ------------------------------------------------------------------------------------

LISTEN = "encoding=linear16&sample_rate=16000&channels=1&interim_results=true&endpointing=25"


@pytest.mark.parametrize(
    "query",
    [
        "sample_rate=abc",
        "sample_rate=50",
        "sample_rate=0",
        "endpointing=true",
        "endpointing=-5",
        "utterance_end_ms=soon",
        "interim_results=yes",
        "encoding=opus",
        "channels=2",
    ],
)
async def test_deepgram_refuses_a_bad_query_at_the_handshake_with_400(
    vendor_fakes: VendorFakes, http_session: aiohttp.ClientSession, query: str
) -> None:
    name, value = query.split("=")
    params = dict(p.split("=") for p in LISTEN.split("&")) | {name: value}
    url = f"{vendor_fakes.deepgram_url}?" + "&".join(f"{k}={v}" for k, v in params.items())
    with pytest.raises(aiohttp.WSServerHandshakeError) as err:
        await http_session.ws_connect(url)
    assert err.value.status == 400
    async with http_session.get(url) as resp:  # the same refusal, read as plain HTTP
        assert resp.status == 400
        body = await resp.json()
    assert body["err_code"] == "Bad Request"
    assert name in body["err_msg"]
    assert vendor_fakes.deepgram.opened == []


@pytest.mark.parametrize("garbage", ["not json", "[1, 2]", '"KeepAlive"'])
async def test_deepgram_closes_with_1008_and_a_reason_on_garbage(
    vendor_fakes: VendorFakes, http_session: aiohttp.ClientSession, garbage: str
) -> None:
    async with asyncio.timeout(20):
        ws = await http_session.ws_connect(f"{vendor_fakes.deepgram_url}?{LISTEN}")
        await ws.send_str(garbage)
        msg = await ws.receive()
        await ws.close()
    assert msg.type == aiohttp.WSMsgType.CLOSE
    assert ws.close_code == 1008
    assert "not JSON" in str(msg.extra)


# -- Anthropic -----------------------------------------------------------------------------------

MESSAGE = {
    "model": "claude-haiku-4-5",
    "max_tokens": 64,
    "stream": True,
    "messages": [{"role": "user", "content": "hi"}],
}


@pytest.mark.parametrize(
    "raw",
    [
        b"{nope",
        b"",
        b"[1, 2]",
        json.dumps({**MESSAGE, "messages": 5}).encode(),
        json.dumps({**MESSAGE, "messages": []}).encode(),
        json.dumps({**MESSAGE, "max_tokens": "many"}).encode(),
        json.dumps({k: v for k, v in MESSAGE.items() if k != "model"}).encode(),
    ],
)
async def test_anthropic_refuses_a_malformed_request_with_400(
    vendor_fakes: VendorFakes, http_session: aiohttp.ClientSession, raw: bytes
) -> None:
    url = f"{vendor_fakes.anthropic_url}/v1/messages"
    headers = {"content-type": "application/json"}
    async with http_session.post(url, data=raw, headers=headers) as resp:
        assert resp.status == 400
        assert resp.headers["request-id"].startswith("req_")
        body = await resp.json()
    assert body["type"] == "error"
    assert body["error"]["type"] == "invalid_request_error"
    assert body["error"]["message"]
    assert vendor_fakes.anthropic.state.attempts == 1
