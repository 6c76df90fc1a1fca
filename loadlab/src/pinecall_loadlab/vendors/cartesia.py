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
`CartesiaConfig.chars_per_s`, made one chunk at a time as it is sent. Faults: ``status`` refuses
a handshake or a bytes request; the others apply to the next synthesis context (a ``stall`` says
nothing for it).

A bad request gets what Cartesia answers: HTTP 400 with a JSON error on ``/tts/bytes``; on the
WebSocket an error event ``{"type": "error", "done": true, "status_code": 400, "error", …}`` for
the context (the socket stays open). Bad is: a message that is not a JSON object, a transcript
that is not a string or is longer than `CartesiaConfig.max_chars` (per context), an
``output_format`` that is not raw ``pcm_s16le`` at one of `SAMPLE_RATES`. A bad request is
counted as an attempt but takes no fault.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
from aiohttp import WSMsgType, web

from .config import CartesiaConfig, Fault
from .state import VendorState, cut, status_response

log = logging.getLogger(__name__)

_STREAM_FAULTS = frozenset({"stall", "drop", "malformed", "error_event"})
SAMPLE_RATES = frozenset({8000, 16000, 22050, 24000, 44100, 48000})
"""The raw PCM rates Cartesia offers."""


class BadRequest(Exception):
    """A request Cartesia would answer with 400; the message says why."""


def speech_like(seconds: float, rate: int) -> bytes:
    """`seconds` of s16le mono at `rate`: a 220 Hz tone with a 4 Hz syllable envelope."""
    return _tone(0, int(seconds * rate), rate)


def _tone(start: int, n: int, rate: int) -> bytes:
    """Samples `start` … `start + n` of `speech_like` (consecutive pieces join seamlessly)."""
    t = (start + np.arange(n)) / rate
    wave = 0.3 * np.sin(2 * np.pi * 220 * t) * (0.6 + 0.4 * np.sin(2 * np.pi * 4 * t))
    return (wave * 32767).astype("<i2").tobytes()


def speech_chunks(seconds: float, rate: int, chunk_s: float) -> Iterator[bytes]:
    """`speech_like(seconds, rate)` made and yielded `chunk_s` at a time, never the whole clip
    at once."""
    total = int(seconds * rate)
    step = max(1, int(chunk_s * rate))
    for start in range(0, total, step):
        yield _tone(start, min(step, total - start), rate)


def sample_rate_of(request: Any) -> int:
    """The ``output_format`` of a request (a decoded JSON object): its sample rate, or
    `BadRequest`."""
    fmt = request.get("output_format", {"sample_rate": 24000})
    if not isinstance(fmt, dict):
        raise BadRequest("output_format must be an object")
    if fmt.get("container", "raw") != "raw" or fmt.get("encoding", "pcm_s16le") != "pcm_s16le":
        raise BadRequest("this fake speaks only raw pcm_s16le")
    rate = fmt.get("sample_rate")
    if type(rate) is not int or rate not in SAMPLE_RATES:
        raise BadRequest(f"output_format.sample_rate must be one of {sorted(SAMPLE_RATES)}")
    return rate


def transcript_of(request: Any, cfg: CartesiaConfig, said: int = 0) -> str:
    """The ``transcript`` of a request, checked against the per-context length cap (`said`
    characters already in the context), or `BadRequest`."""
    text = request.get("transcript", "")
    if not isinstance(text, str):
        raise BadRequest("transcript must be a string")
    if said + len(text) > cfg.max_chars:
        raise BadRequest(f"transcript longer than {cfg.max_chars} characters")
    return text


def voice_of(request: Any) -> str:
    """The voice a request asks for: its ``voice.id`` (``mode`` ``id``), else ``""`` (an
    embedding, or none)."""
    voice = request.get("voice")
    if isinstance(voice, dict) and voice.get("mode", "id") == "id":
        return str(voice.get("id", ""))
    return ""


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
        self.contexts: list[dict[str, Any]] = []
        """The first message of every synthesis context on a socket, in order: the voice, model
        and language it asks for, and its first transcript part (what a test reads to see
        which voice said what)."""
        self.voices: list[str] = []
        """The voice each synthesis asked for (a context's first part, or a bytes request), in
        order: what a test reads to see which voice a job spoke with."""

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
        said: dict[str, int] = {}
        failed: set[str] = set()
        try:
            async for msg in ws:
                if msg.type != WSMsgType.TEXT:
                    continue
                try:
                    pkt = json.loads(msg.data)
                except ValueError:
                    pkt = None
                if not isinstance(pkt, dict):
                    await self._refuse(ws, None, "message is not a JSON object")
                    continue
                cid = pkt.get("context_id", "")
                if not isinstance(cid, str):
                    await self._refuse(ws, None, "context_id must be a string")
                    continue
                if pkt.get("cancel"):
                    if cid in tasks:
                        tasks.pop(cid).cancel()
                    continue
                if cid in failed:
                    continue  # its error event ended it
                try:
                    text = transcript_of(pkt, self.state.config, said.get(cid, 0))
                    if cid not in contexts:
                        rate = sample_rate_of(pkt)
                except BadRequest as e:
                    if cid not in contexts:
                        self.state.attempt(kinds=frozenset())  # counted, takes no fault
                    elif cid in tasks:
                        tasks.pop(cid).cancel()
                    failed.add(cid)
                    await self._refuse(ws, cid, str(e))
                    continue
                if cid not in contexts:
                    self.contexts.append(pkt)
                    self.voices.append(voice_of(pkt))
                    contexts[cid] = asyncio.Queue()
                    ctx_fault = self.state.attempt(kinds=_STREAM_FAULTS)
                    tasks[cid] = asyncio.create_task(
                        self._context(request, ws, cid, pkt, rate, contexts[cid], ctx_fault)
                    )
                said[cid] = said.get(cid, 0) + len(text)
                self.transcripts.append(text)
                contexts[cid].put_nowait((text, bool(pkt.get("continue"))))
        finally:
            for task in tasks.values():
                task.cancel()
            await asyncio.gather(*tasks.values(), return_exceptions=True)
            self.state.socket_ended(ws)
        return ws

    async def _refuse(self, ws: web.WebSocketResponse, cid: str | None, why: str) -> None:
        """Cartesia's answer to a bad message: an error event (for its context, if any); the
        socket stays open."""
        log.warning("cartesia fake: bad request (context %r): %s", cid, why)
        event: dict[str, Any] = {"type": "error", "done": True, "status_code": 400, "error": why}
        if cid is not None:
            event["context_id"] = cid
        await ws.send_json(event)

    async def _context(
        self,
        request: web.Request,
        ws: web.WebSocketResponse,
        cid: str,
        first: dict[str, Any],
        rate: int,
        parts: asyncio.Queue[tuple[str, bool] | None],
        fault: Fault | None,
    ) -> None:
        """Speak one context's parts in order; ``done`` after the part with continue false."""
        cfg = self.state.config
        stamps = bool(first.get("add_timestamps"))
        if fault is not None and fault.kind == "stall":
            await self.state.stall()
            return
        sent = 0
        offset = 0.0
        due = time.monotonic() + cfg.first_s
        while (item := await parts.get()) is not None:
            text, more = item
            for chunk in speech_chunks(duration_of(text, cfg), rate, cfg.chunk_audio_s):
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
                data = base64.b64encode(chunk).decode()
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
        cfg = self.state.config
        try:
            try:
                body = json.loads(await request.read())
            except ValueError:
                raise BadRequest("body is not JSON") from None
            if not isinstance(body, dict):
                raise BadRequest("body is not a JSON object")
            text = transcript_of(body, cfg)
            rate = sample_rate_of(body)
        except BadRequest as e:
            self.state.attempt(kinds=frozenset())  # counted, takes no fault
            log.warning("cartesia fake: bad /tts/bytes request: %s", e)
            msg = json.dumps(
                {"error_code": "invalid_request", "title": "Bad Request", "message": str(e)}
            )
            return web.Response(status=400, body=msg.encode(), content_type="application/json")
        fault = self.state.attempt()
        if fault is not None and fault.kind == "status":
            msg = json.dumps({"error_code": None, "title": "Injected", "message": "fault"})
            return status_response(fault, msg.encode(), "application/json")
        if fault is not None and fault.kind == "stall":
            await self.state.stall()
            return web.Response(status=503)
        self.transcripts.append(text)
        self.voices.append(voice_of(body))
        await asyncio.sleep(cfg.first_s)
        resp = web.StreamResponse(headers={"content-type": "application/octet-stream"})
        await resp.prepare(request)
        chunks = speech_chunks(duration_of(text, cfg), rate, cfg.chunk_audio_s)
        for n, chunk in enumerate(chunks):
            if fault is not None and n >= fault.after:
                cut(request)
                return resp
            await resp.write(chunk)
            await asyncio.sleep(cfg.chunk_s)
        await resp.write_eof()
        return resp
