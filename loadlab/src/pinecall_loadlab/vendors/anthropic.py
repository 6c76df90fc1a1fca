"""Anthropic's Messages API on its own wire: ``POST /v1/messages`` with ``"stream": true``.

livekit-plugins-anthropic 1.8.9 calls it through the ``anthropic`` SDK (``llm.py`` L298-318:
``client.messages.create(stream=True, timeout=conn_options.timeout)``, SDK retries off, so the
framework's ``conn_options`` retries are the only ones). The SDK reads server-sent events
(``anthropic/_streaming.py`` ``AsyncStream.__stream__``): ``ping`` skipped, ``error`` raised as a
status error, anything else parsed as JSON. The plugin turns ``message_start`` /
``message_delta`` usage into token counts, ``text_delta`` into chat chunks and a ``tool_use``
block (``input_json_delta`` parts, closed by ``content_block_stop``) into a function call
(``llm.py`` L392-470).

Served: ``message_start`` → per block ``content_block_start``, deltas,
``content_block_stop`` → ``message_delta`` (``stop_reason``, output tokens) → ``message_stop``,
with a ``ping`` after the first block starts, as the API does. A request whose body does not ask
for ``stream`` gets one JSON message. Errors are the API's JSON (``{"type": "error",
"error": {"type": "overloaded_error", …}}``) with a ``request-id`` header. A malformed request
(a body that is not a JSON object; ``model`` not a string; ``max_tokens`` not a positive whole
number; ``messages`` not a non-empty list of objects; ``stream`` not a boolean) gets the API's
400 ``invalid_request_error`` — which the plugin does not retry — counted as an attempt, taking
no fault.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections import deque
from typing import Any

from aiohttp import web

from .config import AnthropicConfig
from .state import VendorState, cut, status_response
from .turns import DEFAULT_REPLY, Reply, ToolUse, Turns

__all__ = ["DEFAULT_REPLY", "ERROR_TYPES", "AnthropicFake", "Reply", "ToolUse"]

log = logging.getLogger(__name__)

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
    529: "overloaded_error",
}


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def _invalid(body: Any) -> str | None:
    """Why the Messages API would refuse `body` with a 400, or None."""
    if not isinstance(body, dict):
        return "request body must be a JSON object"
    if not isinstance(body.get("model"), str):
        return "model: Field required (a string)"
    max_tokens = body.get("max_tokens")
    if type(max_tokens) is not int or max_tokens < 1:
        return "max_tokens: Field required (a whole number >= 1)"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: Field required (a non-empty list)"
    if not all(isinstance(m, dict) for m in messages):
        return "messages: each message must be an object"
    if not isinstance(body.get("stream", False), bool):
        return "stream: Input should be a valid boolean"
    return None


def _chunks(text: str, words: int = 3) -> list[str]:
    parts = text.split(" ")
    return [
        " ".join(parts[i : i + words]) + (" " if i + words < len(parts) else "")
        for i in range(0, len(parts), words)
    ]


class AnthropicFake:
    """The ``/v1/messages`` handler. `script` queues replies; otherwise :class:`.turns.Turns`
    answers (a tool's result said, a tool asked on ``tool_share`` of the turns, else
    `DEFAULT_REPLY`)."""

    def __init__(self, state: VendorState[AnthropicConfig]) -> None:
        self.state = state
        self._replies: deque[Reply] = deque()
        self.requests: list[dict[str, Any]] = []
        """Every request body received, in order."""
        self.turns = Turns()
        """The unscripted answers: its ``asked`` lists each tool asked."""

    def script(self, *replies: Reply) -> None:
        """Queue the next answers (one per request that gets through)."""
        self._replies.extend(replies)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        rid = f"req_{uuid.uuid4().hex[:24]}"
        try:
            body = json.loads(await request.read())
        except ValueError:
            why: str | None = "request body is not valid JSON"
        else:
            why = _invalid(body)
        if why is not None:
            self.state.attempt(kinds=frozenset())  # counted, takes no fault
            log.warning("anthropic fake: bad request: %s", why)
            err = {"type": "error", "error": {"type": "invalid_request_error", "message": why}}
            return web.json_response(err, status=400, headers={"request-id": rid})
        self.requests.append(body)
        fault = self.state.attempt()
        if fault is not None and fault.kind == "status":
            kind = ERROR_TYPES.get(fault.status, "api_error")
            err = {"type": "error", "error": {"type": kind, "message": f"injected {fault.status}"}}
            refusal = status_response(fault, json.dumps(err).encode(), "application/json")
            refusal.headers["request-id"] = rid
            return refusal
        if self._replies:
            reply = self._replies.popleft()
        else:
            reply = self.turns.answer(body, self.state.config.tool_share)
        msg_id = f"msg_{uuid.uuid4().hex[:24]}"
        in_tokens = max(1, len(json.dumps(body.get("messages", []))) // 4)
        out_tokens = max(1, int(len(reply.text.split()) * 1.3)) + (20 if reply.tool else 0)
        stop = "tool_use" if reply.tool else "end_turn"
        if not body.get("stream"):
            await asyncio.sleep(self.state.config.first_s)
            return web.json_response(
                self._message(body, msg_id, reply, stop, in_tokens, out_tokens),
                headers={"request-id": rid},
            )
        resp = web.StreamResponse(
            headers={
                "content-type": "text/event-stream",
                "cache-control": "no-cache",
                "request-id": rid,
            }
        )
        await resp.prepare(request)
        start = self._message(body, msg_id, Reply(), None, in_tokens, 1)
        await resp.write(_sse("message_start", {"type": "message_start", "message": start}))
        if fault is not None and fault.kind == "stall":
            await self.state.stall()
            return resp
        cfg = self.state.config
        blocks: list[tuple[dict[str, Any], str, list[str]]] = []
        if reply.text:
            blocks.append(({"type": "text", "text": ""}, "text_delta", _chunks(reply.text)))
        if reply.tool:
            block = {
                "type": "tool_use",
                "id": f"toolu_{uuid.uuid4().hex[:24]}",
                "name": reply.tool.name,
                "input": {},
            }
            args = json.dumps(reply.tool.input)
            parts = [args[i : i + 12] for i in range(0, len(args), 12)] or ["{}"]
            blocks.append((block, "input_json_delta", parts))
        sent = 0
        for index, (block, delta_type, parts) in enumerate(blocks):
            await resp.write(
                _sse(
                    "content_block_start",
                    {"type": "content_block_start", "index": index, "content_block": block},
                )
            )
            if index == 0:
                await resp.write(_sse("ping", {"type": "ping"}))
                await asyncio.sleep(cfg.first_s)
            for part in parts:
                if fault is not None and sent >= fault.after:
                    if fault.kind == "drop":
                        cut(request)
                        return resp
                    if fault.kind == "malformed":
                        await resp.write(
                            b'event: content_block_delta\ndata: {"type": "content_\n\n'
                        )
                        return resp
                    if fault.kind == "error_event":
                        err = {
                            "type": "error",
                            "error": {"type": "overloaded_error", "message": "Overloaded"},
                        }
                        await resp.write(_sse("error", err))
                        return resp
                key = "text" if delta_type == "text_delta" else "partial_json"
                delta = {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": delta_type, key: part},
                }
                await resp.write(_sse("content_block_delta", delta))
                sent += 1
                await asyncio.sleep(cfg.chunk_s)
            await resp.write(
                _sse("content_block_stop", {"type": "content_block_stop", "index": index})
            )
        await resp.write(
            _sse(
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": out_tokens},
                },
            )
        )
        await resp.write(_sse("message_stop", {"type": "message_stop"}))
        await resp.write_eof()
        return resp

    @staticmethod
    def _message(
        body: dict[str, Any],
        msg_id: str,
        reply: Reply,
        stop: str | None,
        in_tokens: int,
        out_tokens: int,
    ) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        if reply.text:
            content.append({"type": "text", "text": reply.text})
        if reply.tool:
            content.append(
                {
                    "type": "tool_use",
                    "id": f"toolu_{uuid.uuid4().hex[:24]}",
                    "name": reply.tool.name,
                    "input": reply.tool.input,
                }
            )
        return {
            "id": msg_id,
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "claude-haiku-4-5"),
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {
                "input_tokens": in_tokens,
                "output_tokens": out_tokens,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
            },
        }
