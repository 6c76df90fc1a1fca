"""The web chat's wire: its token and ``WS /v1/chat``'s frames and close codes (issue 17).

Source: seed 002, "A written call", "The page"; ``shared/reference/app-socket.md`` §2–§3.

A page's server mints a :class:`ChatToken` with its app key (``POST /v1/chat/tokens``, a
:class:`ChatTokenRequest`): scoped to one agent of one org in the key's environment and, when
resuming, to one call; short-lived. The page dials ``WS /v1/chat?token=<token>`` (a new call) or
``WS /v1/chat?token=<token>&call=<call>`` (the same call again, after a cut, to any replica).

Frames are JSON text, one tagged object each (``"type"``). The server speaks first:

==================  =====  ===============================================================
frame               dir    meaning
==================  =====  ===============================================================
``chat.ready``      S→P    the call this socket serves, and its history (the log's turns)
``chat.message``    P→S    a visitor's message, with the page's own id for it
``chat.delta``      S→P    a piece of the reply to ``message``, as the model makes it
``chat.reply``      S→P    the whole reply to ``message`` (``replayed``: answered before)
==================  =====  ===============================================================

A message the page sends again with the same ``id`` (after a cut, to any replica) is answered
once: one answered before gets its ``chat.reply`` (``replayed: true``) and nothing is written.
Whatever is refused closes the socket with a code of :class:`ChatClose` and writes nothing.
"""

from __future__ import annotations

import datetime as dt
from enum import IntEnum
from typing import Annotated, Literal

import msgspec

from pinecall_contracts.agents import Org
from pinecall_contracts.base import Contract
from pinecall_contracts.calls import AgentField, CallIdField
from pinecall_contracts.ids import EnvironmentField

MessageId = Annotated[
    str, msgspec.Meta(pattern=r"^[A-Za-z0-9_.:-]{1,128}$(?![\s\S])", examples=["m-1"])
]
"""The page's own id of a message: the same when it sends the message again."""


class ChatClose(IntEnum):
    """Every close code of ``WS /v1/chat`` (RFC 6455 keeps 4000-4999 private). A page dials
    again, with ``?call=``, after :attr:`GOING_AWAY`, :attr:`UNAVAILABLE` and :attr:`INTERNAL`
    (and after a cut with no close at all); the others would be refused again."""

    NORMAL = 1000
    GOING_AWAY = 1001
    """The replica is stopping: dial again with ``?call=``, to any replica."""
    TOO_BIG = 1009
    """A frame over ``max_frame_bytes`` (``chat.ready.limits``)."""
    MALFORMED = 4400
    """A frame that is not a ``chat.message`` (not JSON, another type, a bad id), or binary; or
    a dial whose ``?call=`` is not a call id."""
    BAD_TOKEN = 4401
    """No chat token, one not good (its signature), or one expired."""
    OUT_OF_SCOPE = 4403
    """``?call=`` names a call of another org, environment or agent, or one the token is not
    scoped to; or a written call the dial may not take (a voice call)."""
    NO_CALL = 4404
    """``?call=`` names no call."""
    SUPERSEDED = 4410
    """Another session of this call (the page dialled it twice: on another replica, or on this
    one) wrote on its log first: this one's message or reply was refused by the log's count
    and nothing of it was written. Dial again with ``?call=`` (the history then has what the
    other wrote) and send the message again with its id."""
    NOT_OPEN = 4409
    """The call ended (or was sealed): open a new one (dial without ``?call=``)."""
    TOO_LONG = 4413
    """A message over ``max_message_chars``."""
    UNKNOWN_AGENT = 4422
    """The token's agent is not defined by its org in its environment (the dispatcher's
    ``unknown_agent``): nothing was opened; define it, or mint a token for one that is."""
    QUOTA = 4429
    """The org holds its ``concurrent_calls`` quota: later it may pass."""
    UNAVAILABLE = 4503
    """call-log or the dispatcher did not answer: dial again later."""
    INTERNAL = 1011
    """The server failed (a defect of ours, logged): dial again with ``?call=``."""


class ChatTokenRequest(Contract, frozen=True, kw_only=True, tag="chat.token_request.v1"):
    """``POST /v1/chat/tokens`` with an app key: a visitor's chat token for ``agent`` of
    ``org`` in the key's environment; ``call`` scopes it to that call (a page resuming)."""

    agent: AgentField
    org: Org
    call: CallIdField | None = None
    visitor: Annotated[str, msgspec.Meta(max_length=128)] = ""
    """Who the visitor is to the page (kept on the call's context as its ``contact``)."""


class ChatToken(Contract, frozen=True, kw_only=True, tag="chat.token.v1"):
    """A chat token: ``WS /v1/chat?token=<token>`` until ``expires_at``."""

    token: str
    agent: str
    org: str
    environment: EnvironmentField
    call: str | None = None
    expires_at: dt.datetime


class ChatLimits(msgspec.Struct, frozen=True, kw_only=True):
    max_frame_bytes: int
    max_message_chars: int


class Said(msgspec.Struct, frozen=True, kw_only=True):
    """One turn of the history: ``user`` (a visitor's message) or ``assistant`` (a reply)."""

    role: Literal["user", "assistant"]
    text: str
    message: str
    """The message's id (a reply: the message it answers)."""


class ChatReady(Contract, frozen=True, kw_only=True, tag="chat.ready.v1"):
    """The socket serves ``call`` from now on: its history is the log's turns."""

    call: CallIdField
    agent: AgentField
    resumed: bool
    """True when the dial named the call (``?call=``): the session was rebuilt from the log."""
    history: list[Said] = []
    limits: ChatLimits


class ChatMessage(Contract, frozen=True, kw_only=True, tag="chat.message.v1"):
    """A visitor's message; ``id`` is the page's, the same when the page sends it again."""

    id: MessageId
    text: Annotated[str, msgspec.Meta(min_length=1)]


class ChatDelta(Contract, frozen=True, kw_only=True, tag="chat.delta.v1"):
    """A piece of the reply to ``message``, as the model makes it."""

    message: MessageId
    text: str


class ChatReply(Contract, frozen=True, kw_only=True, tag="chat.reply.v1"):
    """The whole reply to ``message``, written on the log once (``replayed``: it was, before)."""

    message: MessageId
    text: str
    replayed: bool = False


ToPage = ChatReady | ChatDelta | ChatReply
FromPage = ChatMessage
