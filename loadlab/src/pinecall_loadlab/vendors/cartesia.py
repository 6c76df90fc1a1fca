"""Cartesia's text to speech on its own wire: the ``/tts/websocket`` stream and ``/tts/bytes``.

As livekit-plugins-cartesia 1.8.9 speaks it (``livekit/plugins/cartesia/tts.py``):

- WebSocket ``GET /tts/websocket?cartesia_version=2025-04-16`` with ``X-API-Key`` (``_connect_ws``,
  L222-252); connections are pooled and reused for many streams, each a ``context_id``;
- per sentence the client sends ``{"context_id", "transcript", "continue": true, "model_id",
  "voice", "output_format": {"container": "raw", "encoding": "pcm_s16le", "sample_rate"},
  "language", "add_timestamps"}`` and ends the context with ``transcript: " "``,
  ``continue: false`` (``_sentence_stream_task``, L452-474);
- the server answers ``{"type": "chunk", "data": <base64 PCM>, "done": false}``,
  ``{"type": "timestamps", "word_timestamps": {"words", "start", "end"}}`` and finally
  ``{"type": "done", "done": true}``, each with the ``context_id`` (``_recv_task``, L485-566);
  an error is ``{"type": "error", "done": true, "status_code", "error"}``. A ``{"context_id",
  "cancel": true}`` stops a context;
- ``POST /tts/bytes`` (``ChunkedStream``, L380-423) answers the whole transcript as raw PCM.

The audio is a 220 Hz tone shaped like syllables (4 Hz), as long as the text takes to say at
`CartesiaConfig.chars_per_s`. Faults: ``status`` refuses a handshake or a bytes request; the
others apply to the next synthesis context (a ``stall`` says nothing for it).
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from typing import Any

import numpy as np
from aiohttp import WSMsgType, web

from .config import CartesiaConfig, Fault
from .state import VendorState, cut, status_response

_STREAM_FAULTS = frozenset({"stall", "drop", "malformed", "error_event"})


def speech_like(seconds: float, rate: int) -> bytes:
    """`seconds` of s16le mono at `rate`: a 220 Hz tone with a 4 Hz syllable envelope."""
    t = np.arange(int(seconds * rate)) / rate
    wave = 0.3 * np.sin(2 * np.pi * 220 * t) * (0.6 + 0.4 * np.sin(2 * np.pi * 4 * t))
    return (wave * 32767).astype("<i2").tobytes()


def duration_of(text: str, cfg: CartesiaConfig) -> float:
    """Seconds it takes to say `text` (0 for blank text)."""
    return len(text.strip()) / cfg.chars_per_s


class CartesiaFake:
    """The ``/tts/websocket`` and ``/tts/bytes`` handlers."""

    def __init__(self, state: VendorState[CartesiaConfig]) -> None:
        self.state = state
        self.connections = 0
        self.transcripts: list[str] = []
        """Every transcript part received, in order."""

    async def handle_ws(self, request: web.Request) -> web.StreamResponse:
        self.connections += 1
        fault = self.state.attempt(kinds=frozenset({"status"}), count=False)
        if fault is not None:
            self.state.attempt(kinds=frozenset())  # a refused handshake is an attempt
            body = json.dumps({"error_code": None, "title": "Injected", "message": "fault"})
            return status_response(fault, body.encode(), "application/json")
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        self.state.sockets.add(ws)
        contexts: dict[str, asyncio.Queue[tuple[str, bool] | None]] = {}
        tasks: dict[str, asyncio.Task[None]] = {}
        try:
            async for msg in ws:
                if msg.type != WSMsgType.TEXT:
                    continue
                pkt = json.loads(msg.data)
                cid = pkt.get("context_id", "")
                if pkt.get("cancel"):
                    if cid in tasks:
                        tasks.pop(cid).cancel()
                    continue
                if cid not in contexts:
                    contexts[cid] = asyncio.Queue()
                    ctx_fault = self.state.attempt(kinds=_STREAM_FAULTS)
                    tasks[cid] = asyncio.create_task(
                        self._context(request, ws, cid, pkt, contexts[cid], ctx_fault)
                    )
                self.transcripts.append(pkt.get("transcript", ""))
                contexts[cid].put_nowait((pkt.get("transcript", ""), bool(pkt.get("continue"))))
        finally:
            for task in tasks.values():
                task.cancel()
            await asyncio.gather(*tasks.values(), return_exceptions=True)
            self.state.sockets.discard(ws)
        return ws

    async def _context(
        self,
        request: web.Request,
        ws: web.WebSocketResponse,
        cid: str,
        first: dict[str, Any],
        parts: asyncio.Queue[tuple[str, bool] | None],
        fault: Fault | None,
    ) -> None:
        """Speak one context's parts in order; ``done`` after the part with continue false."""
        cfg = self.state.config
        rate = int(first.get("output_format", {}).get("sample_rate", 24000))
        stamps = bool(first.get("add_timestamps"))
        if fault is not None and fault.kind == "stall":
            await self.state.stall()
            return
        sent = 0
        offset = 0.0
        due = time.monotonic() + cfg.first_s
        while (item := await parts.get()) is not None:
            text, more = item
            pcm = speech_like(duration_of(text, cfg), rate)
            step = int(cfg.chunk_audio_s * rate) * 2
            for i in range(0, len(pcm), step):
                await asyncio.sleep(max(0.0, due - time.monotonic()))
                if fault is not None and sent >= fault.after:
                    if fault.kind == "drop":
                        cut(request)
                        return
                    if fault.kind == "malformed":
                        await ws.send_str("<html>502 Bad Gateway</html>")
                        fault = None
                    elif fault.kind == "error_event":
                        await ws.send_json(
                            {
                                "type": "error",
                                "done": True,
                                "context_id": cid,
                                "status_code": fault.status,
                                "error": "injected",
                            }
                        )
                        return
                data = base64.b64encode(pcm[i : i + step]).decode()
                await ws.send_json(
                    {
                        "type": "chunk",
                        "data": data,
                        "done": False,
                        "status_code": 206,
                        "step_time": cfg.chunk_s * 1e3,
                        "context_id": cid,
                    }
                )
                sent += 1
                due = time.monotonic() + cfg.chunk_s
            if stamps and text.strip():
                words = text.split()
                each = duration_of(text, cfg) / len(words)
                await ws.send_json(
                    {
                        "type": "timestamps",
                        "done": False,
                        "status_code": 206,
                        "context_id": cid,
                        "word_timestamps": {
                            "words": words,
                            "start": [offset + k * each for k in range(len(words))],
                            "end": [offset + (k + 1) * each for k in range(len(words))],
                        },
                    }
                )
            offset += duration_of(text, cfg)
            if not more:
                await ws.send_json(
                    {"type": "done", "done": True, "status_code": 206, "context_id": cid}
                )
                return

    async def handle_bytes(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        fault = self.state.attempt()
        cfg = self.state.config
        if fault is not None and fault.kind == "status":
            msg = json.dumps({"error_code": None, "title": "Injected", "message": "fault"})
            return status_response(fault, msg.encode(), "application/json")
        if fault is not None and fault.kind == "stall":
            await self.state.stall()
            return web.Response(status=503)
        self.transcripts.append(body.get("transcript", ""))
        rate = int(body.get("output_format", {}).get("sample_rate", 24000))
        pcm = speech_like(duration_of(body.get("transcript", ""), cfg), rate)
        await asyncio.sleep(cfg.first_s)
        resp = web.StreamResponse(headers={"content-type": "application/octet-stream"})
        await resp.prepare(request)
        step = int(cfg.chunk_audio_s * rate) * 2
        for n, i in enumerate(range(0, len(pcm), step)):
            if fault is not None and n >= fault.after:
                cut(request)
                return resp
            await resp.write(pcm[i : i + step])
            await asyncio.sleep(cfg.chunk_s)
        await resp.write_eof()
        return resp
