"""The chat service's rules, as pure functions of plain values: a written call's history from its
log, and who may dial which call.

The history of a written call is its log's turns and nothing else (issue 17): each ``turn.user``
(a contact's message, ``data.message`` its id) and each ``turn.agent`` (a reply, ``data.reply_to``
the message it answers), in seq order. A message whose id has a reply is *answered*: sent again,
it is answered with that reply, never a second time. A message with no reply (the replica died
mid-reply) is answered when it is next sent.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from pinecall_contracts.calls import CallRecord, LoggedEntry
from pinecall_contracts.entries import TURN_AGENT, TURN_USER

Role = Literal["user", "assistant"]


@dataclass(frozen=True, slots=True)
class Turn:
    """One turn of a written call: who wrote it, what, and the contact's message id it is or
    answers."""

    role: Role
    text: str
    message: str


@dataclass(slots=True)
class History:
    """A written call's turns, the messages written, and each answered one's reply."""

    turns: list[Turn] = field(default_factory=list)
    written: set[str] = field(default_factory=set)
    """Message ids whose ``turn.user`` is on the log."""
    replies: dict[str, str] = field(default_factory=dict)
    """Message id → its reply's text."""

    def add(self, turn: Turn) -> None:
        self.turns.append(turn)
        if turn.role == "user":
            self.written.add(turn.message)
        else:
            self.replies[turn.message] = turn.text


def history(entries: Iterable[LoggedEntry]) -> History:
    """The history of a written call from its log's entries (any order: sorted by seq here);
    entries of other kinds, or turns with no text or id, are not turns of the conversation."""
    found = History()
    for entry in sorted(entries, key=lambda e: e.seq):
        text, data = entry.data.get("text"), entry.data
        if not isinstance(text, str):
            continue
        if entry.kind == TURN_USER and isinstance(data.get("message"), str):
            found.add(Turn("user", text, data["message"]))
        elif entry.kind == TURN_AGENT and isinstance(data.get("reply_to"), str):
            found.add(Turn("assistant", text, data["reply_to"]))
    return found


Refusal = Literal["not_open", "not_written", "other_agent", "other_org", "other_environment"]


def may_take_up(record: CallRecord, *, agent: str, org: str, environment: str) -> Refusal | None:
    """Why a dial scoped to ``agent`` of ``org`` in ``environment`` may not take up ``record``'s
    call, or None. Checked in this order, so a call of another org is refused as that before
    anything else about it is said."""
    if record.environment != environment:
        return "other_environment"
    if record.org != org:
        return "other_org"
    if record.agent != agent:
        return "other_agent"
    if record.channel not in ("chat", "whatsapp"):
        return "not_written"
    if record.state != "open":
        return "not_open"
    return None
