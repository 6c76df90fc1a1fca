"""Tool calls answered once per id (issue 16: "tool.call / tool.result, once per id").

A ``tool.call`` runs its handler the first time its id is heard. The result is kept until well
past the tool's deadline, so the same id heard again (after a reconnect the server sends every
tool call still waiting for an answer, after ``call.attached``) sends the kept result again and
never runs the handler twice; one whose handler still runs is answered when it returns, on the
socket the app has then. The server writes one result per id and acknowledges it
(``tool.result.ack``); an ``unavailable`` refusal (Postgres did not answer) is sent again until
the deadline, one it cannot keep (too large, a NUL) is replaced once by an error the model can
speak around.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import msgspec
import stamina

from pinecall.agent import ToolContext, call_maybe_async
from pinecall.errors import ToolError
from pinecall_contracts.appsocket import ErrorFrame, ToolCallFrame, ToolResultAck, ToolResultFrame
from pinecall_contracts.base import encode
from pinecall_contracts.calls import MAX_ENTRY_BYTES, entry_bytes

if TYPE_CHECKING:
    from pinecall.app import App
    from pinecall.call import Call

log = logging.getLogger("pinecall")

KEPT_PAST_DEADLINE = dt.timedelta(minutes=5)
"""A result is kept this long after its tool's deadline (the server asks nothing after it; the
margin covers a clock apart from the server's)."""
MAX_ERROR = 2000
"""An error's characters, at most (``pinecall_contracts.calls.Text``)."""


class _Again(Exception):
    """The server could not take the result now (``unavailable``): send it again."""


@dataclass
class Answer:
    """One tool call id's answer: its handler runs once; ``result`` is kept once it returned."""

    asked: ToolCallFrame
    result: ToolResultFrame | None = None
    delivering: bool = False
    acked: ToolResultAck | None = None
    waiting: asyncio.Future[ToolResultAck | ErrorFrame | None] | None = field(default=None)


class Answers:
    """Every tool call this app process heard, by (call, id)."""

    def __init__(self, app: App) -> None:
        self._app = app
        self._answers: dict[tuple[str, str], Answer] = {}
        self.runs = 0
        """Handlers run, in all (once per tool call id)."""
        self.heard = 0
        """``tool.call`` frames heard, an id heard again (after a reconnect) included."""

    def asked(self, frame: ToolCallFrame, call: Call | None) -> None:
        """A ``tool.call``: run its handler the first time its id is heard; send the kept result
        when its handler has returned; nothing while it still runs (it sends when it returns)."""
        self._forget_expired()
        self.heard += 1
        key = (frame.call, frame.id)
        answer = self._answers.get(key)
        if answer is None:
            answer = self._answers[key] = Answer(asked=frame)
            self._app.spawn(self._answer(answer, call), f"tool {frame.name} {frame.id}")
        elif answer.result is not None and not answer.delivering:
            log.info("tool call %s of %s asked again: its kept result sent", frame.id, frame.call)
            self._app.spawn(self._deliver(answer), f"tool result {frame.id}")

    def acked(self, frame: ToolResultAck) -> None:
        answer = self._answers.get((frame.call, frame.id))
        if answer is not None and answer.waiting is not None and not answer.waiting.done():
            answer.waiting.set_result(frame)

    def refused(self, frame: ErrorFrame) -> bool:
        """An ``error`` about a result this app sent (``re`` is its tool call's id, or for
        ``not_held`` the call the socket does not hold: every result of it on its way is
        refused alike); False when it is about none."""
        found = False
        for answer in self._answers.values():
            about = frame.re in (
                (answer.asked.id, answer.asked.call)
                if frame.code == "not_held"
                else (answer.asked.id,)
            )
            if about and answer.waiting is not None:
                if not answer.waiting.done():
                    answer.waiting.set_result(frame)
                found = True
        return found

    def lost(self) -> None:
        """The socket went: no acknowledgement comes for what was sent on it (a result not
        written is asked for again after ``call.attached``)."""
        for answer in self._answers.values():
            if answer.waiting is not None and not answer.waiting.done():
                answer.waiting.set_result(None)

    def forget(self, call: str) -> None:
        """The call ended: none of its tool calls is asked again."""
        for key in [k for k, a in self._answers.items() if k[0] == call and not a.delivering]:
            if self._answers[key].result is not None:
                del self._answers[key]

    def _forget_expired(self) -> None:
        now = dt.datetime.now(dt.UTC)
        for key, answer in list(self._answers.items()):
            past = answer.asked.deadline + KEPT_PAST_DEADLINE < now
            if past and answer.result is not None and not answer.delivering:
                del self._answers[key]

    async def _answer(self, answer: Answer, call: Call | None) -> None:
        answer.result = await self._run(answer.asked, call)
        await self._deliver(answer)

    async def _run(self, asked: ToolCallFrame, call: Call | None) -> ToolResultFrame:
        agent = self._app.agents.get(call.agent) if call is not None else None
        handler = agent.tools.get(asked.name) if agent is not None else None
        if call is None or handler is None:
            log.warning(
                "tool call %s asks %r: this app has no handler for it", asked.id, asked.name
            )
            return self._error(asked, f"the app has no handler for the tool {asked.name}")
        self.runs += 1
        context = ToolContext(call=call, id=asked.id, name=asked.name, deadline=asked.deadline)
        try:
            value = await call_maybe_async(handler, dict(asked.arguments), context)
        except ToolError as exc:
            return self._error(asked, str(exc) or f"the tool {asked.name} failed")
        except Exception:
            log.exception("tool %s (call %s, id %s) failed", asked.name, asked.call, asked.id)
            return self._error(asked, f"the tool {asked.name} failed")
        return self._result(asked, value)

    def _error(self, asked: ToolCallFrame, error: str) -> ToolResultFrame:
        return ToolResultFrame(call=asked.call, id=asked.id, error=error[:MAX_ERROR])

    def _result(self, asked: ToolCallFrame, value: object) -> ToolResultFrame:
        """The handler's value as a result frame, or an error one when it is not JSON or too
        large for the log (``calls.MAX_ENTRY_BYTES``) or the socket (``limits.max_frame_bytes``:
        a frame over it would close the socket, and with it every call this app serves)."""
        frame = ToolResultFrame(call=asked.call, id=asked.id, result=value)
        try:
            size = len(encode(frame))
            entry = entry_bytes({"id": asked.id, "result": value, "error": None})
        except (TypeError, msgspec.EncodeError) as exc:
            log.error("tool %s answered what is not JSON: %s", asked.name, exc)
            return self._error(asked, f"the tool {asked.name} answered what is not JSON")
        limit = self._app.max_frame_bytes
        if entry > MAX_ENTRY_BYTES or (limit is not None and size > limit):
            log.error("tool %s answered %d bytes: too large", asked.name, size)
            return self._error(asked, f"the tool {asked.name} answered too much ({size} bytes)")
        return frame

    async def _deliver(self, answer: Answer) -> None:
        """Send the kept result and hear where it landed, again while the server is
        ``unavailable`` and the deadline not past."""
        answer.delivering = True
        try:
            async for attempt in stamina.retry_context(
                on=_Again,
                attempts=None,
                timeout=None,
                wait_initial=0.1,
                wait_max=2.0,
                wait_jitter=0.1,
            ):
                with attempt:
                    await self._exchange(answer)
        finally:
            answer.delivering = False

    async def _exchange(self, answer: Answer) -> None:
        assert answer.result is not None
        answer.waiting = asyncio.get_running_loop().create_future()
        try:
            if not await self._app.send(answer.result):
                return  # no socket now: the server asks again once the call is attached
            heard = await answer.waiting
        finally:
            answer.waiting = None
        match heard:
            case None:
                return  # the socket went before the acknowledgement: asked again if not written
            case ToolResultAck(duplicate=duplicate):
                answer.acked = heard
                if duplicate:
                    log.info("tool call %s was answered before: the first answer stands", heard.id)
            case ErrorFrame(code="unavailable") if answer.asked.deadline > dt.datetime.now(dt.UTC):
                raise _Again
            case ErrorFrame(code="invalid" | "malformed") if answer.result.error is None:
                log.error(
                    "tool call %s: the server refused the result: %s", heard.re, heard.message
                )
                answer.result = self._error(
                    answer.asked, f"the app's answer was refused: {heard.message}"
                )
                raise _Again
            case ErrorFrame():
                log.info("tool call %s: %s: %s", heard.re, heard.code, heard.message)
