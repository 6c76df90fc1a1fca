"""The written-call engine (seed 002, "A written call"): open or take up a written call through
call-log, and answer a contact's message once per its id.

A *written call* is a call of channel ``chat`` (the web chat) or ``whatsapp`` (a thread), opened
on call-log like a voice call (``CallOpen.channel``) and run on its agent's version as the log
keeps it on the call's config. Each contact message is a ``turn.user`` entry and each reply a
``turn.agent`` entry, written through the call's one writer (batches after the writer's count);
both carry the contact's message id (``message``), which is how a message sent again (a page
re-sending after a cut, Meta delivering again) is recognised: answered once, never twice.

A :class:`WrittenCall` is a *session*: held in memory only while a socket or a thread is served,
rebuilt from the log by :meth:`Conversations.take_up` (the history is the log's turns, nothing
else) on any replica, after any restart.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal

from pinecall_clients.writer import CallLogWriter
from pinecall_contracts.calls import CallRecord

Channel = Literal["chat", "whatsapp"]


@dataclass(slots=True, kw_only=True)
class WrittenCall:
    """One written call's session: what it is, its writer, and its turns so far."""

    record: CallRecord
    channel: Channel
    contact: str
    """Who writes: a web visitor's id, or a WhatsApp number (E.164 without ``+``)."""
    writer: CallLogWriter
    turns: list[dict[str, Any]] = field(default_factory=list)
    """``{"role": "user"|"assistant", "text", "message"}`` in the log's order."""
    replies: dict[str, str] = field(default_factory=dict)
    """Each message id answered, with its reply's text (from the log and from this session)."""

    @property
    def call(self) -> str:
        return self.record.call


class Conversations:
    """Written calls of this replica: opened or taken up through call-log, answered once."""

    async def open(
        self,
        *,
        channel: Channel,
        contact: str,
        agent: str,
        org: str,
        environment: str,
        context: dict[str, Any] | None = None,
    ) -> WrittenCall:
        """Open a new written call of ``agent`` for ``contact`` (admission included)."""
        raise NotImplementedError

    async def take_up(
        self, call: str, *, environment: str, agent: str | None = None, org: str | None = None
    ) -> WrittenCall:
        """The session of the open written call ``call``, rebuilt from its log."""
        raise NotImplementedError

    def answer(self, call: WrittenCall, message_id: str, text: str) -> AsyncIterator[str]:
        """The agent's reply to ``text`` as text deltas, made as it is made; the message and the
        reply are written once per ``message_id`` (one answered before yields its reply whole)."""
        raise NotImplementedError
