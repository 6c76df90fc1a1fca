"""Deepgram's live transcription on its own wire: ``GET /v1/listen`` upgraded to a WebSocket.

As livekit-plugins-deepgram 1.8.9 speaks it (``livekit/plugins/deepgram/stt.py``):

- the query carries ``encoding=linear16``, ``sample_rate``, ``channels``, ``interim_results``,
  ``endpointing`` (ms, or ``false``), ``vad_events``, ``utterance_end_ms``, ``tag`` … (built by
  ``_connect_ws``, L747-790, through ``_utils._to_deepgram_url``); auth is ``Authorization: Token
  <key>``;
- the client sends binary 50 ms chunks of s16le PCM (``send_task``, L616-650) and text
  ``{"type": "KeepAlive"}`` every 5 s, ``{"type": "Finalize"}`` on a flush and
  ``{"type": "CloseStream"}`` at the end;
- the server answers ``SpeechStarted``, ``Results`` (``is_final``, ``speech_final``,
  ``channel.alternatives[0].transcript/words/confidence``, ``metadata.request_id``),
  ``UtteranceEnd`` and, on close, ``Metadata`` (``_process_stream_event``, L834-909).

The ear: an utterance is audio louder than `DeepgramConfig.threshold_dbfs` in 10 ms windows,
ended by `silence_s` of quiet (never less than the client's ``endpointing``). What it "said"
comes from `DeepgramFake.script` (per ``tag``, else the default queue), else filler words at
2.5 a second. Times in messages are seconds of audio received on this connection. Deepgram
closes a socket that hears nothing (no audio, no KeepAlive) for 10 s with 1011; so does this.

Bad requests: a query Deepgram would refuse (``sample_rate`` not a whole number from 8000 to
48000, ``encoding`` other than ``linear16``, ``channels`` other than 1 — the fake hears mono
only —, ``endpointing`` not ``false`` or whole milliseconds, ``utterance_end_ms`` not whole
milliseconds, ``interim_results`` / ``vad_events`` not ``true`` / ``false``) is refused at the
handshake with HTTP 400 and Deepgram's JSON error (counted as an attempt, taking no fault); a
text message that is not a JSON object closes the socket with 1008 and a reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections import defaultdict, deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from aiohttp import WSMsgType, web

from .config import DeepgramConfig, Fault
from .state import VendorState, cut, status_response

log = logging.getLogger(__name__)

WORDS_PER_S = 2.5
IDLE_CLOSE_S = 10.0
FILLER = ("okay", "so", "I", "was", "wondering")
MODEL_INFO = {"name": "2-general-nova", "version": "2024-01-09.29447", "arch": "nova-3"}


@dataclass
class _Utterance:
    start: float
    text: str
    last_loud: float
    interims: int = 0
    started_sent: bool = False


@dataclass
class _Conn:
    """One live socket's options and audio clock."""

    rate: int
    interim: bool
    vad_events: bool
    endpoint_s: float
    utterance_end_s: float | None
    tag: str | None
    request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    audio_s: float = 0.0
    results_sent: int = 0
    utterance: _Utterance | None = None
    last_word_end: float | None = None
    carry: bytes = b""


class DeepgramFake:
    """The ``/v1/listen`` handler. `script` says what callers say; `state` holds the knobs."""

    def __init__(self, state: VendorState[DeepgramConfig]) -> None:
        self.state = state
        self._scripts: dict[str | None, deque[str]] = defaultdict(deque)
        self.opened: list[dict[str, str]] = []
        """The query of every accepted socket, in order."""
        self.control: list[str] = []
        """Every text message a client sent (``KeepAlive``, ``Finalize``, ``CloseStream``)."""
        self.sent: list[str] = []
        """The ``type`` of every message sent, in order, over all sockets."""

    @staticmethod
    def _options(q: Any, cfg: DeepgramConfig) -> _Conn:
        """The socket's options from its query, or `ValueError` saying what is wrong."""

        def whole(name: str, default: str, low: int, high: int) -> int:
            raw = q.get(name, default)
            if not raw.isdigit() or not low <= int(raw) <= high:
                raise ValueError(f"{name}={raw!r} is not a whole number from {low} to {high}")
            return int(raw)

        def flag(name: str) -> bool:
            raw = q.get(name, "false")
            if raw not in ("true", "false"):
                raise ValueError(f"{name}={raw!r} is not true or false")
            return raw == "true"

        if q.get("encoding", "linear16") != "linear16":
            raise ValueError(f"encoding={q['encoding']!r}: this fake hears linear16 only")
        if whole("channels", "1", 1, 16) != 1:
            raise ValueError("channels: this fake hears mono only")
        endpointing = q.get("endpointing", "10")
        endpoint_s = 0.0 if endpointing == "false" else whole("endpointing", "10", 0, 60000) / 1e3
        return _Conn(
            rate=whole("sample_rate", "16000", 8000, 48000),
            interim=flag("interim_results"),
            vad_events=flag("vad_events"),
            endpoint_s=max(cfg.silence_s, endpoint_s),
            utterance_end_s=(
                whole("utterance_end_ms", "0", 1, 60000) / 1e3 if "utterance_end_ms" in q else None
            ),
            tag=q.get("tag"),
        )

    def script(self, *lines: str, tag: str | None = None) -> None:
        """Queue what the next utterances say: on sockets opened with ``tag=<tag>``, or any."""
        self._scripts[tag].extend(lines)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        cfg = self.state.config
        try:
            conn = self._options(request.query, cfg)
        except ValueError as e:
            self.state.attempt(kinds=frozenset())  # counted, takes no fault
            log.warning("deepgram fake: bad request: %s", e)
            rid = str(uuid.uuid4())
            body = json.dumps({"err_code": "Bad Request", "err_msg": str(e), "request_id": rid})
            return web.Response(
                status=400,
                body=body.encode(),
                content_type="application/json",
                headers={"dg-request-id": rid},
            )
        fault = self.state.attempt()
        if fault is not None and fault.kind == "status":
            body = json.dumps({"err_code": "FAULT", "err_msg": f"injected {fault.status}"})
            return status_response(fault, body.encode(), "application/json")
        if fault is not None and fault.kind == "stall":
            await self.state.stall()
            return web.Response(status=503)
        q = request.query
        ws = web.WebSocketResponse(autoping=True)
        ws.headers["dg-request-id"] = conn.request_id
        await ws.prepare(request)
        self.state.sockets.add(ws)
        self.opened.append(dict(q))
        out: asyncio.Queue[tuple[float, dict[str, Any] | str | None]] = asyncio.Queue()
        sender = asyncio.create_task(self._send(request, ws, conn, out, fault))
        try:
            await self._receive(ws, conn, out)
        finally:
            out.put_nowait((0.0, None))
            with contextlib.suppress(Exception):
                await sender
            self.state.socket_ended(ws)
            await ws.close()
        return ws

    async def _receive(
        self, ws: web.WebSocketResponse, conn: _Conn, out: asyncio.Queue[Any]
    ) -> None:
        while True:
            try:
                msg = await ws.receive(timeout=IDLE_CLOSE_S)
            except TimeoutError:
                await ws.close(code=1011, message=b"NET-0001")
                return
            if msg.type == WSMsgType.BINARY:
                self._hear(conn, msg.data, out)
            elif msg.type == WSMsgType.TEXT:
                try:
                    pkt = json.loads(msg.data)
                except ValueError:
                    pkt = None
                if not isinstance(pkt, dict):
                    log.warning("deepgram fake: closing on a text message that is not JSON")
                    await ws.close(code=1008, message=b"DATA-0000: text message is not JSON")
                    return
                kind = str(pkt.get("type"))
                self.control.append(kind)
                if kind == "Finalize" and conn.utterance is not None:
                    self._final(conn, out, speech_final=False, from_finalize=True)
                elif kind == "CloseStream":
                    if conn.utterance is not None:
                        self._final(conn, out, speech_final=True)
                    out.put_nowait((0.0, self._metadata(conn)))
                    return
            else:
                return

    def _hear(self, conn: _Conn, data: bytes, out: asyncio.Queue[Any]) -> None:
        cfg = self.state.config
        pcm = conn.carry + data
        win = conn.rate // 100 * 2  # 10 ms of s16le
        whole = len(pcm) // win * win
        conn.carry = pcm[whole:]
        samples = np.frombuffer(pcm[:whole], dtype="<i2").astype(np.float64).reshape(-1, win // 2)
        rms = np.sqrt(np.mean(samples**2, axis=1)) / 32768.0
        loud = 20 * np.log10(np.maximum(rms, 1e-9)) > cfg.threshold_dbfs
        for is_loud in loud:
            conn.audio_s += 0.01
            u = conn.utterance
            if is_loud and u is None:
                conn.utterance = u = _Utterance(conn.audio_s, self._next_text(conn), conn.audio_s)
                if conn.vad_events:
                    out.put_nowait(
                        (
                            0.0,
                            {
                                "type": "SpeechStarted",
                                "channel": [0, 1],
                                "timestamp": round(u.start, 3),
                            },
                        )
                    )
            elif is_loud and u is not None:
                u.last_loud = conn.audio_s
            if u is None:
                self._utterance_end(conn, out)
                continue
            if conn.audio_s - u.last_loud >= conn.endpoint_s:
                self._final(conn, out, speech_final=True)
            elif conn.interim and conn.audio_s - u.start >= (u.interims + 1) * cfg.interim_every_s:
                u.interims += 1
                heard = conn.audio_s - u.start
                words = u.text.split()
                n = max(1, min(len(words) - 1, int(heard * WORDS_PER_S)))
                out.put_nowait((0.0, self._results(conn, u, " ".join(words[:n]), final=False)))

    def _utterance_end(self, conn: _Conn, out: asyncio.Queue[Any]) -> None:
        end = conn.last_word_end
        limit = conn.utterance_end_s
        if limit is not None and end is not None and conn.audio_s - end >= limit:
            conn.last_word_end = None
            msg = {"type": "UtteranceEnd", "channel": [0, 1], "last_word_end": round(end, 3)}
            out.put_nowait((0.0, msg))

    def _final(
        self,
        conn: _Conn,
        out: asyncio.Queue[Any],
        *,
        speech_final: bool,
        from_finalize: bool = False,
    ) -> None:
        u = conn.utterance
        assert u is not None
        msg = self._results(conn, u, u.text, final=True, speech_final=speech_final)
        msg["from_finalize"] = from_finalize
        conn.utterance = None
        conn.last_word_end = u.last_loud
        out.put_nowait((time.monotonic() + self.state.config.first_s, msg))

    def _next_text(self, conn: _Conn) -> str:
        for key in (conn.tag, None):
            if self._scripts[key]:
                return self._scripts[key].popleft()
        return " ".join(FILLER[:4])

    def _results(
        self, conn: _Conn, u: _Utterance, text: str, *, final: bool, speech_final: bool = False
    ) -> dict[str, Any]:
        words = text.split()
        span = max(u.last_loud - u.start, 0.1)
        step = span / max(len(words), 1)
        return {
            "type": "Results",
            "channel_index": [0, 1],
            "duration": round(span, 3),
            "start": round(u.start, 3),
            "is_final": final,
            "speech_final": speech_final,
            "from_finalize": False,
            "channel": {
                "alternatives": [
                    {
                        "transcript": text,
                        "confidence": 0.98,
                        "words": [
                            {
                                "word": w.strip(",.?!").lower(),
                                "start": round(u.start + i * step, 3),
                                "end": round(u.start + (i + 1) * step, 3),
                                "confidence": 0.98,
                                "punctuated_word": w,
                            }
                            for i, w in enumerate(words)
                        ],
                    }
                ]
            },
            "metadata": {
                "request_id": conn.request_id,
                "model_info": MODEL_INFO,
                "model_uuid": "00000000-0000-0000-0000-000000000000",
            },
        }

    def _metadata(self, conn: _Conn) -> dict[str, Any]:
        return {
            "type": "Metadata",
            "transaction_key": "deprecated",
            "request_id": conn.request_id,
            "duration": round(conn.audio_s, 3),
            "channels": 1,
            "models": [MODEL_INFO["name"]],
        }

    async def _send(
        self,
        request: web.Request,
        ws: web.WebSocketResponse,
        conn: _Conn,
        out: asyncio.Queue[tuple[float, dict[str, Any] | str | None]],
        fault: Fault | None,
    ) -> None:
        """Send queued messages in order, each not before its due time (monotonic s)."""
        while True:
            due, msg = await out.get()
            if msg is None:
                return
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            is_results = isinstance(msg, dict) and msg["type"] == "Results"
            if fault is not None and is_results and conn.results_sent >= fault.after:
                if fault.kind in ("drop", "error_event"):
                    cut(request)
                    return
                if fault.kind == "malformed":
                    await ws.send_str('{"type": "Results", "channel": ')
                    fault = None
            await ws.send_str(json.dumps(msg))
            self.sent.append(msg["type"] if isinstance(msg, dict) else "?")
            if isinstance(msg, dict) and msg["type"] == "Results":
                conn.results_sent += 1
