"""``WS /v1/chat?token=<chat token>[&call=<call>]``: the web chat (issue 17, "The web chat").

The frames and close codes are :mod:`pinecall_contracts.chat`'s. The dial is checked before
anything is written: the token (4401), then the call it names (``?call=``: 4404 none, 4403 of
another org, environment or agent, or not the token's call, or not a written call; 4409 not
open); a dial naming no call is admitted at the dispatcher (4422 an agent its org does not
define there, 4429 the org at its ``concurrent_calls``, 4503 the dispatcher silent) and opens a
new written call through call-log (the app holding the agent hears ``call.attached``). Then ``chat.ready`` with the history, and each ``chat.message`` is
answered in order: ``chat.delta`` as the reply is made, ``chat.reply`` when it is whole. A frame
refused closes the socket (4400 malformed, 4413 too long, 1009 too big) and writes nothing; so
does a dial whose ``?call=`` is no call id (4400). A close's reason is for the page: never a
URL or a failure's text of ours (1011 says only to dial again; the replica logs the rest).

Two sockets of one call (a page that dialled twice): the first to write wins; the other is
closed 4410 when the log refuses its write on its count, nothing of it written.

The socket ends the session, never the call: the page dials again with ``?call=`` (to any
replica) and the session is rebuilt from the log; a message it sends again (same id) is answered
once. A reply cut off by the socket's end is not written, and is made again when the message is
sent again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from typing import Any

import msgspec
from litestar import WebSocket, websocket
from litestar.exceptions import WebSocketDisconnect

from pinecall_chat.conversation import NoKey, Refused, Superseded, WrittenCall
from pinecall_chat.service import ChatService
from pinecall_chat.tokens import BadToken, Claims, verify
from pinecall_clients.errors import (
    CallLogRefused,
    CallLogUnavailable,
    CallUnknown,
    DispatcherRefused,
    DispatcherUnavailable,
)
from pinecall_contracts.calls import CALL_ID_PATTERN
from pinecall_contracts.chat import (
    ChatClose,
    ChatDelta,
    ChatLimits,
    ChatMessage,
    ChatReady,
    ChatReply,
    Said,
)

_log = logging.getLogger(__name__)
AnySocket = WebSocket[Any, Any, Any]
_encode = msgspec.json.encode
_decoder = msgspec.json.Decoder(ChatMessage)
_CALL_ID = re.compile(CALL_ID_PATTERN)
FAILED = "the server failed: dial again with ?call="
"""The reason of a 1011: what the page does; the failure itself is in the replica's log."""
CALL_LOG_SILENT = "call-log did not answer: dial again later"


class _Closing(Exception):
    def __init__(self, code: ChatClose, reason: str) -> None:
        super().__init__(reason)
        self.code, self.reason = code, reason[:120]


@websocket("/v1/chat")
async def chat_socket(socket: AnySocket) -> None:
    """A visitor's chat (the module docstring)."""
    service: ChatService = socket.app.state.chat
    await socket.accept()
    service.sockets += 1
    try:
        call = await _dial(service, socket)
        await _serve(service, socket, call)
    except _Closing as closing:
        service.refused += closing.code not in (ChatClose.GOING_AWAY, ChatClose.UNAVAILABLE)
        await _close(socket, closing.code, closing.reason)
    except (_Gone, WebSocketDisconnect):
        pass
    except Exception:  # a defect of ours: said in the log, the page told 1011 (dial again)
        _log.exception("chat socket failed")
        await _close(socket, ChatClose.INTERNAL, FAILED)
    finally:
        service.sockets -= 1


class _Gone(Exception):
    """The page left."""


async def _close(socket: AnySocket, code: int, reason: str) -> None:
    try:
        await socket.close(code, reason)
    except Exception:  # the page left first: nothing to tell it
        _log.debug("chat socket gone before its close %d", code)


async def _dial(service: ChatService, socket: AnySocket) -> WrittenCall:
    """The written call this socket serves: taken up (``?call=``) or opened."""
    settings = service.settings
    try:
        claims = verify(settings.chat_token_secret, socket.query_params.get("token"))
    except BadToken as exc:
        raise _Closing(ChatClose.BAD_TOKEN, str(exc)) from None
    wanted = socket.query_params.get("call")
    if wanted is not None and not _CALL_ID.match(wanted):
        raise _Closing(ChatClose.MALFORMED, "?call= is not a call id (like call_7Qm2x)")
    conversations = service.conversations
    try:
        if wanted is None:
            if claims.call is not None:
                raise _Closing(ChatClose.OUT_OF_SCOPE, "this token is for its call: ?call=")
            return await conversations.open(
                channel="chat",
                contact=claims.visitor,
                agent=claims.agent,
                org=claims.org,
                environment=claims.environment,
            )
        if claims.call is not None and claims.call != wanted:
            raise _Closing(ChatClose.OUT_OF_SCOPE, "the token is for another call")
        return await conversations.take_up(
            wanted, environment=claims.environment, agent=claims.agent, org=claims.org
        )
    except Refused as exc:
        code = ChatClose.NOT_OPEN if exc.why == "not_open" else ChatClose.OUT_OF_SCOPE
        raise _Closing(code, f"call {wanted}: {exc.why.replace('_', ' ')}") from None
    except CallUnknown:
        raise _Closing(ChatClose.NO_CALL, f"no call {wanted}") from None
    except NoKey as exc:
        raise _Closing(ChatClose.OUT_OF_SCOPE, str(exc)) from None
    except CallLogRefused as exc:
        raise _Closing(*_said(_refusal(exc, claims), exc.problem.detail)) from None
    except CallLogUnavailable:
        raise _Closing(ChatClose.UNAVAILABLE, CALL_LOG_SILENT) from None
    except DispatcherRefused as exc:
        raise _Closing(*_said(_not_admitted(exc, claims), exc.problem.detail)) from None
    except DispatcherUnavailable:
        raise _Closing(
            ChatClose.UNAVAILABLE, "the dispatcher did not answer: dial again later"
        ) from None


def _said(code: ChatClose, detail: str | None) -> tuple[ChatClose, str]:
    """A refusal's close: the peer's problem detail is said to the page when it is the page's
    to hear, never a failure of ours (where, besides, an internal URL could be)."""
    if code == ChatClose.INTERNAL:
        return code, FAILED
    return code, detail or code.name.lower().replace("_", " ")


def _not_admitted(exc: DispatcherRefused, claims: Claims) -> ChatClose:
    if exc.status == 422 and exc.problem.code == "unknown_agent":
        return ChatClose.UNKNOWN_AGENT
    if exc.status == 429:
        return ChatClose.QUOTA
    _log.error(
        "the dispatcher refused a chat of %s in %s: %s", claims.agent, claims.environment, exc
    )
    return ChatClose.INTERNAL


def _refusal(exc: CallLogRefused, claims: Claims) -> ChatClose:
    if exc.status == 403:
        return ChatClose.OUT_OF_SCOPE
    if exc.status == 409:
        return ChatClose.NOT_OPEN
    if exc.status == 429:
        return ChatClose.QUOTA
    _log.error("call-log refused a chat of %s in %s: %s", claims.agent, claims.environment, exc)
    return ChatClose.INTERNAL


async def _receive(service: ChatService, socket: AnySocket) -> ChatMessage:
    settings = service.settings
    message = await socket.receive()
    if message["type"] == "websocket.disconnect":
        raise _Gone
    text = message.get("text")
    if not isinstance(text, str):
        raise _Closing(ChatClose.MALFORMED, "frames are JSON text")
    if len(text) > settings.chat_max_frame_bytes or (
        len(text.encode()) > settings.chat_max_frame_bytes
    ):
        raise _Closing(ChatClose.TOO_BIG, f"a frame is at most {settings.chat_max_frame_bytes} B")
    try:
        frame = _decoder.decode(text)
    except msgspec.MsgspecError as exc:
        raise _Closing(ChatClose.MALFORMED, f"not a chat.message: {exc}") from None
    if len(frame.text) > settings.chat_max_message_chars:
        raise _Closing(
            ChatClose.TOO_LONG, f"a message is at most {settings.chat_max_message_chars} chars"
        )
    return frame


async def _serve(service: ChatService, socket: AnySocket, call: WrittenCall) -> None:
    settings = service.settings
    await socket.send_text(
        _encode(
            ChatReady(
                call=call.call,
                agent=call.record.agent,
                resumed=bool(socket.query_params.get("call")),
                history=[
                    Said(role=t.role, text=t.text, message=t.message) for t in call.history.turns
                ],
                limits=ChatLimits(
                    max_frame_bytes=settings.chat_max_frame_bytes,
                    max_message_chars=settings.chat_max_message_chars,
                ),
            )
        ).decode()
    )
    # frames are read while a reply is made: the page leaving (or a frame refused) cancels the
    # reply under way, which is then not written (sent again, the message is answered then)
    inbox: asyncio.Queue[ChatMessage] = asyncio.Queue()
    reader = asyncio.create_task(_read(service, socket, inbox), name="chat-read")
    answering = asyncio.create_task(_answer(service, socket, call, inbox), name="chat-answer")
    try:
        await asyncio.wait((reader, answering), return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (reader, answering):
            task.cancel()
        await asyncio.gather(reader, answering, return_exceptions=True)
    for task in (reader, answering):
        if not task.cancelled() and (exc := task.exception()) is not None:
            raise exc


async def _read(service: ChatService, socket: AnySocket, inbox: asyncio.Queue[ChatMessage]) -> None:
    while True:
        inbox.put_nowait(await _receive(service, socket))


async def _answer(
    service: ChatService, socket: AnySocket, call: WrittenCall, inbox: asyncio.Queue[ChatMessage]
) -> None:
    conversations = service.conversations
    while True:
        message = await inbox.get()
        replayed = message.id in call.history.replies
        made: list[str] = []
        try:
            async with contextlib.aclosing(
                conversations.answer(call, message.id, message.text)
            ) as deltas:
                async for delta in deltas:
                    made.append(delta)
                    if not replayed:
                        await socket.send_text(
                            _encode(ChatDelta(message=message.id, text=delta)).decode()
                        )
        except Superseded:
            raise _Closing(
                ChatClose.SUPERSEDED, "another session of this call wrote first: dial again"
            ) from None
        except CallLogUnavailable:
            raise _Closing(ChatClose.UNAVAILABLE, CALL_LOG_SILENT) from None
        except CallLogRefused as exc:
            raise _Closing(
                *_said(
                    ChatClose.NOT_OPEN if exc.status == 409 else ChatClose.INTERNAL,
                    "the call ended",
                )
            ) from None
        reply = ChatReply(message=message.id, text="".join(made), replayed=replayed)
        await socket.send_text(_encode(reply).decode())


ROUTES = [chat_socket]
