"""What the load lab's simulated callers say of each call they place (``lab callers --out``),
and what an app process under watch says it did (``lab app --ledger``).

One JSON line per change of a caller's state, each the caller's whole state so far, so a reader
keeps the last line of each caller. ``up`` reads them for its live table and its report; the
caller knows only what a phone or a page knows: its room, who picked up (the agent participant's
``lk.agent_name``), when it heard the agent, and the token endpoint's answer.

Source: issue 8 ("The whole platform on one machine"): a caller is *silent* when it heard no
agent's voice within 12 s of its arrival; the reader decides that from ``first_heard_s``.

An app process's ledger is one :class:`AppEvent` line per thing it did, appended by the process
itself: each call attached to it or detached from it, each tool handler it entered. ``up`` counts
tool calls run more than once (by every process, per id) and calls handed between processes from
them (issue 16, "In the main job": the app's own count).

A simulated chat visitor (``lab chats --out``, issue 17, "In the main job") says its written call
the same way: one :class:`ChatReport` line per change, its whole state so far.
"""

from __future__ import annotations

import datetime as dt
from typing import Literal

from pinecall_contracts.base import Contract
from pinecall_contracts.calls import CallIdField

CallerKind = Literal["sip", "web"]
"""A phone through LiveKit SIP, or a web visitor with a token from ``POST /v1/tokens``."""
CallerState = Literal["ringing", "answered", "heard", "ended", "refused", "failed"]
"""``ringing``: in its room, nobody there yet; ``answered``: an agent joined; ``heard``: its
voice reached the caller; ``ended``: the caller hung up or the far end closed the room;
``refused``: the token endpoint said no (a visitor never joins); ``failed``: the caller could not
place or hold the call (``error`` says why)."""


class CallerReport(Contract, frozen=True, kw_only=True, tag="lab.caller.v1"):
    """One simulated caller as it stands now."""

    caller: int
    """Its number in the run, from 0."""
    kind: CallerKind
    environment: str
    state: CallerState
    room: str | None = None
    """Its room (None for a visitor refused at the endpoint)."""
    call: str | None = None
    """The call id when the caller knows it (a visitor's token names it; a phone's is the
    dispatcher's, said on the call log)."""
    number: str | None = None
    """A phone's number (``sip.phoneNumber``)."""
    arrived_at: dt.datetime | None = None
    """When it joined its room (its arrival), UTC."""
    answered_by: str | None = None
    """The ``lk.agent_name`` of the agent that joined: a worker, or ``<fleet>/overflow``."""
    answered_s: float | None = None
    """Seconds from arrival to an agent in the room."""
    first_heard_s: float | None = None
    """Seconds from arrival to the first agent audio it heard."""
    waits_s: list[float] = []
    """For each line it said, seconds from the line's end to the agent's first audio after it
    (first audio as the caller hears it)."""
    said: list[str] = []
    """The lines it said so far, in order (names of the lab's recorded lines: ``greeting``,
    ``question``): what its channel of the call's recording holds (issue 19, "In the lab")."""
    ended_at: dt.datetime | None = None
    ended_by: Literal["caller", "far_end"] | None = None
    """Who ended it: the caller hung up, or the far end closed the room (the overflow does)."""
    refused: str | None = None
    """The token endpoint's problem code (``fleet_full``, ``not_ready``, …)."""
    callback: bool = False
    """A refused visitor's page asked a call back (``POST /v1/callbacks``) and it was taken."""
    error: str | None = None


AppEventKind = Literal["held", "attached", "detached", "tool"]
"""``held``: the process's socket is open and every agent registered (after each connect);
``attached``: a call was handed to it (``why``: new, handed, parked); ``detached``: it no longer
serves a call (``why``: ended, drained, lost); ``tool``: it entered a tool's handler for the tool
call ``id``."""


class AppEvent(Contract, frozen=True, kw_only=True, tag="lab.app.v1"):
    """One thing an app process did, as it says it (a line of its ledger)."""

    instance: str
    """The process's instance id (its socket's)."""
    what: AppEventKind
    at: dt.datetime
    """When, UTC, by the process's clock."""
    agent: str | None = None
    call: CallIdField | None = None
    why: str | None = None
    """``attached``: new, handed or parked; ``detached``: ended, drained or lost."""
    tool: str | None = None
    id: str | None = None
    """The tool call's id (``tool``)."""


ChatState = Literal["dialling", "chatting", "done", "stopped", "failed"]
"""``dialling``: minting its token and dialling ``WS /v1/chat``; ``chatting``: its socket is
served (``chat.ready``); ``done``: every message answered, socket closed; ``stopped``: the run
stopped it first; ``failed``: it could not go on (``error`` says why: a close code it may not
dial again after, or too many cuts)."""


class ChatReport(Contract, frozen=True, kw_only=True, tag="lab.chat.v1"):
    """One simulated chat visitor as it stands now (what a page knows of its written call)."""

    visitor: int
    """Its number in the run, from 0."""
    environment: str
    state: ChatState
    call: CallIdField | None = None
    """Its written call, once a ``chat.ready`` named it."""
    sent: list[str] = []
    """The ids of the messages it sent, in order, each once (a message sent again after a cut
    keeps its id and its place)."""
    answered: list[str] = []
    """The ids of the messages a ``chat.reply`` answered, in the order the replies came."""
    replayed: int = 0
    """Replies that came ``replayed`` (a message sent again, answered before the cut)."""
    dials: int = 0
    """Sockets served (each ``chat.ready``)."""
    resumed: int = 0
    """Of them, dials that named the call (``?call=``) after a cut: the call taken up."""
    cuts: int = 0
    """Sockets that ended under it (a replica gone: a close it dials again after, or none), and
    dials a replica did not answer; each is followed by a dial of the next replica."""
    reply_start_s: list[float] = []
    """For each message answered with deltas, seconds from its send to the reply's first
    ``chat.delta``."""
    started_at: dt.datetime | None = None
    ended_at: dt.datetime | None = None
    error: str | None = None
