"""The call log's wire: opening a call, batches of entries, the end and the seal, tool calls,
callbacks and the agent log, and the events said on NATS.

Source: seed 002 (whole: "A call is its agent's", "The gateway restarts"); seed 000, "Full, at the
endpoint", "A worker that dies"; ``shared/DESIGN.md``, "Numbers the runtime lives by" (retries).

A call's log has one writer. It counts what the log took from it (``written``); a batch says the
count it follows (``after``). The service's own entries (``call.started``, ``call.ended``,
``tool.call``, …) take seqs but are not counted, so ``seq`` and the writer's count differ.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Annotated, Any, Literal

import msgspec

from pinecall_contracts.base import Contract
from pinecall_contracts.ids import AGENT_PATTERN, E164, E164_PATTERN, EnvironmentField
from pinecall_contracts.problems import ProblemDetails

MAX_BATCH = 500
"""Entries in one batch, at most (a worker queues ~2 a second; 500 is minutes of a call)."""

MAX_ENTRY_BYTES = 65_536
"""An entry's ``data`` as JSON, at most this many bytes (64 KiB): call-log refuses an entry over
it with a 422 that names the limit, and writes nothing of its batch. A long agent's turn is a few
KB; the bound keeps one entry far under the HTTP body cap (10 MB), under a ``logs`` page (half of
NATS's 1 MB ``max_payload``) and out of Postgres's way. The writer (``pinecall_clients``) never
sends one: it writes ``{"omitted_bytes": <n>, "over": 65536}`` (:data:`OMITTED`) as the entry's
data instead, so the entry (its kind and time) and the rest of its batch stay on the log."""

OMITTED = "omitted_bytes"
"""The key of the ``data`` that stands in for what was too large to carry: an entry's over
:data:`MAX_ENTRY_BYTES` (the writer), an entry too large for a ``logs`` page alone (call-log)."""


def entry_bytes(data: dict[str, Any]) -> int:
    """The size :data:`MAX_ENTRY_BYTES` bounds: ``data`` as compact JSON (msgspec), in bytes."""
    return len(msgspec.json.encode(data))


CALL_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$(?![\s\S])"
"""A call id: letters, digits and ``_ . : -``, 128 at most (``call_7Qm2x``, ``wa:<n>:<c>:1``)."""
CallIdField = Annotated[str, msgspec.Meta(pattern=CALL_ID_PATTERN, examples=["call_7Qm2x"])]
AgentField = Annotated[str, msgspec.Meta(pattern=AGENT_PATTERN, examples=["support-bot"])]
Kind = Annotated[
    str,
    msgspec.Meta(pattern=r"^[a-z][a-z0-9_]*(\.[a-z0-9_]+){0,4}$(?![\s\S])", max_length=64),
]
"""An entry's kind: ``transcript.user``, ``tool.call``, ``call.ended``."""
Timestamp = Annotated[dt.datetime, msgspec.Meta(tz=True)]
"""An aware datetime (RFC 3339 with an offset); a naive one is refused."""
Count = Annotated[int, msgspec.Meta(ge=0, le=2**31 - 1)]
Seq = Annotated[int, msgspec.Meta(ge=1, le=2**31 - 1)]
Text = Annotated[str, msgspec.Meta(max_length=2000)]
EntryKey = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9_.:/-]{1,128}$(?![\s\S])")]
"""A writer's id of an agent-log entry (:attr:`AgentEntry.key`)."""
TimeoutS = Annotated[float, msgspec.Meta(gt=0.0, le=600.0)]

Outcome = Literal[
    "completed", "caller_hangup", "drained", "timeout", "failed", "overflow", "not_reached"
]
EndCause = Literal["drain_timeout", "shutdown", "room_gone", "lost_agent", "stale"]
"""Why a call ended ``drained`` (``drained`` covers several causes; older readers refuse an
outcome value they do not know, so the cause is a field of its own beside the outcome, None for a
writer that does not say it):

- ``drain_timeout``: the worker's main process, past its drain timeout, ended a call its job did
  not (the job's process died while closing, or the call was still held when it sealed);
- ``shutdown``: the answer job was shut down from outside before its call ended: the worker
  closing its jobs past the drain timeout, or LiveKit's JobTermination (the job cannot tell which);
- ``room_gone``: the answer job's room went (deleted, or disconnected) under a running call;
- ``lost_agent``: the dispatcher's death handler, or the sentence job after it, ended a lost
  agent's call (GLOSSARY, *lost agent*);
- ``stale``: the reaper ended a quiet call with no agent in its room, or no room (GLOSSARY,
  *reap*).
"""
CallState = Literal["open", "ended", "sealed"]
Channel = Literal["chat", "whatsapp"]
"""A written call's channel (seed 002, "A written call"): a web chat over ``WS /v1/chat``, or a
WhatsApp thread. A voice call has none (None)."""


class Entry(Contract, frozen=True, kw_only=True, tag="calls.entry.v1"):
    """One event of a call as its writer sends it; ``ts`` is when it happened (clamped on write
    to the service's clock, never later than the service's now). ``data`` is at most
    :data:`MAX_ENTRY_BYTES` as JSON (422 over it)."""

    kind: Kind
    ts: Timestamp
    data: dict[str, Any] = {}


class CallOpen(Contract, frozen=True, kw_only=True, tag="calls.open.v1"):
    """``POST /v1/calls``: the worker that took the job opens the call (idempotent)."""

    call: CallIdField
    agent: AgentField
    org: Annotated[str, msgspec.Meta(max_length=128)]
    environment: EnvironmentField
    room: Annotated[str, msgspec.Meta(min_length=1, max_length=256)]
    worker: Annotated[str, msgspec.Meta(min_length=1, max_length=320)]
    """The worker name that runs it; ``call.started`` names it."""
    context: dict[str, Any] = {}
    config: dict[str, Any] = {}
    """What the ring said the call runs on. call-log keeps it on the call with, under
    ``agent`` (:data:`pinecall_contracts.agents.CONFIG_AGENT`), the latest version of the call's
    agent when its org defines one: the version the call runs to its end."""
    prompt_hash: Annotated[str, msgspec.Meta(max_length=128)] | None = None
    """The log keeps a prompt's hash, not its text (seed 002); the agent's version's, when the
    org defines the agent."""
    channel: Channel | None = None
    """A written call's channel (issue 17); None for a voice call. Kept on the call."""


class Reopened(Contract, frozen=True, kw_only=True, tag="calls.reopened.v1"):
    """``POST /v1/calls/{call}/reopened``: a worker says again a call an older release opened.

    No quota is asked and no ``call.ringing`` or ``call.started`` is written. ``written`` is the
    count the writer already holds, so its next batch follows on (0 for a writer that used
    ``/events``, which counts nothing).
    """

    agent: AgentField
    context: dict[str, Any] = {}
    org: Annotated[str, msgspec.Meta(max_length=128)] = ""
    room: Annotated[str, msgspec.Meta(max_length=256)] = ""
    worker: Annotated[str, msgspec.Meta(max_length=320)] = ""
    config: dict[str, Any] = {}
    written: Count = 0


class CallRecord(Contract, frozen=True, kw_only=True, tag="calls.record.v1"):
    """What a call is and where its log stands."""

    call: str
    agent: str
    org: str
    environment: str
    room: str
    worker: str
    state: CallState
    written: int
    """Entries the log took from the call's writer (its count)."""
    last_seq: int
    """The last seq taken, by the writer or the service; 0 for none."""
    outcome: Outcome | None = None
    opened_at: dt.datetime
    ended_at: dt.datetime | None = None
    sealed_at: dt.datetime | None = None
    reopened: bool = False
    prompt_hash: str | None = None
    cause: EndCause | None = None
    """Why it ended ``drained``, when its ender said (:data:`EndCause`)."""
    config: dict[str, Any] = {}
    """What the call runs on, as kept when it opened (:attr:`CallOpen.config`, with its agent's
    version under ``agent``); the worker runs the call on it
    (:func:`pinecall_contracts.agents.agent_of`)."""
    channel: Channel | None = None
    """A written call's channel (:attr:`CallOpen.channel`); None for a voice call."""
    context: dict[str, Any] = {}
    """Who and what the call is with, as its opener said (:attr:`CallOpen.context`): a written
    call's contact, a phone call's numbers."""


class EntryBatch(Contract, frozen=True, kw_only=True, tag="calls.batch.v1"):
    """``POST /v1/calls/{call}/entries``: the entries after the writer's count ``after``."""

    after: Count
    entries: Annotated[list[Entry], msgspec.Meta(max_length=MAX_BATCH)]


class BatchWritten(Contract, frozen=True, kw_only=True, tag="calls.batch_written.v1"):
    """The seqs a batch was given, in its order; ``replayed`` when it had been written before."""

    seqs: list[int]
    written: int
    """The writer's count after the batch."""
    replayed: bool = False


CALLS_A_BATCH = 64
"""The calls' batches in one :class:`WorkerBatch`, at most: a worker holds 32 seats, and a retried
part may ride beside its first answer's still in flight."""


class CallBatch(Contract, frozen=True, kw_only=True, tag="calls.call_batch.v1"):
    """One call's part of a :class:`WorkerBatch`: what ``POST /v1/calls/{call}/entries`` takes."""

    call: CallIdField
    after: Count
    entries: Annotated[list[Entry], msgspec.Meta(max_length=MAX_BATCH)]
    traceparent: Annotated[str, msgspec.Meta(max_length=512)] | None = None
    """The W3C ``traceparent`` of the batch's writer: call-log writes its span of the batch in
    that trace, the call's (issue 22), as the one call's route's request would be."""


class WorkerBatch(Contract, frozen=True, kw_only=True, tag="calls.worker_batch.v1"):
    """``POST /v1/entries``: the batches of a worker's calls in one request (issue 20). Each is
    judged, written, replayed or refused on its own, exactly as it would be alone: a request a
    worker a second, not a request a call a second."""

    batches: Annotated[list[CallBatch], msgspec.Meta(min_length=1, max_length=CALLS_A_BATCH)]


class CallBatchAnswer(
    Contract, frozen=True, kw_only=True, omit_defaults=True, tag="calls.call_batch_answer.v1"
):
    """What became of one :class:`CallBatch`: ``written`` (as ``POST /v1/calls/{call}/entries``
    answers 200) or ``problem`` (the problem detail, with its status, it would answer)."""

    call: str
    written: BatchWritten | None = None
    problem: ProblemDetails | None = None


class WorkerBatchWritten(Contract, frozen=True, kw_only=True, tag="calls.worker_batch_written.v1"):
    """``POST /v1/entries``'s answer: one :class:`CallBatchAnswer` a batch, in their order."""

    answers: list[CallBatchAnswer]


class EventWritten(Contract, frozen=True, kw_only=True, tag="calls.event_written.v1"):
    """``POST /v1/calls/{call}/events`` (older workers): the seq the one entry took."""

    seq: int


class LoggedEntry(Contract, frozen=True, kw_only=True, tag="calls.logged_entry.v1"):
    """An entry on the log: ``counted`` is its place in the writer's count (None for the
    service's own entries and for ``/events``)."""

    seq: int
    kind: str
    ts: dt.datetime
    data: dict[str, Any] = {}
    counted: int | None = None


class CallLog(Contract, frozen=True, kw_only=True, tag="calls.log.v1"):
    """``GET /v1/calls/{call}/entries?after=<seq>``: entries in seq order."""

    call: str
    entries: list[LoggedEntry]
    state: CallState


class CallCommandEntry(Contract, frozen=True, kw_only=True, tag="calls.command.v1"):
    """One ``call.command`` entry of a call's log: an app's ``say`` or ``end``, written once per
    its app-minted ``id`` (``pinecall_contracts.appsocket.CallCommand``)."""

    seq: int
    """Its place on the call's log: follow on with ``?after=<seq>``."""
    id: str
    kind: str
    """``say`` or ``end`` (a ``str``, so a reader of an older release gets a kind it does not
    know, and refuses that command, instead of failing on the page)."""
    text: str | None = None
    """What to say; for ``end``, the last sentence, if any."""


class CallCommands(Contract, frozen=True, kw_only=True, tag="calls.commands.v1"):
    """``GET /v1/calls/{call}/commands?after=<seq>&wait_s=<s>``: the call's commands with seq
    above ``after``, in order; empty when none came within ``wait_s`` (a long poll)."""

    call: str
    commands: list[CallCommandEntry]
    state: CallState
    """The call's state when read: a follower stops once it is not ``open``."""


class CallSummary(Contract, frozen=True, kw_only=True, tag="calls.summary.v1"):
    """One call of ``GET /v1/calls``: what it is, where it stands, and when its log last moved
    (the reaper's view, seed 002, "A call nobody is running")."""

    call: str
    agent: str
    environment: str
    room: str
    worker: str
    state: CallState
    outcome: Outcome | None = None
    opened_at: dt.datetime
    ended_at: dt.datetime | None = None
    last_entry_at: dt.datetime
    """The ``ts`` of the call's newest entry (its highest seq): the service's own are the
    service's clock, a writer's are when they happened, clamped to the service's clock."""
    written: int
    last_seq: int
    cause: EndCause | None = None
    """Why it ended ``drained``, when its ender said (:data:`EndCause`)."""
    channel: Channel | None = None
    """A written call's channel: the reaper ends it ``timeout`` once quiet as long as its
    endpoint waits (it has no room to read); None for a voice call."""


class CallPage(Contract, frozen=True, kw_only=True, tag="calls.page.v1"):
    """``GET /v1/calls?state=open&state=ended&after=<call>&limit=<n>``: unsealed calls of one
    environment in call-id order; ``next`` is the ``after`` of the next page (None: the last)."""

    environment: str
    calls: list[CallSummary]
    next: str | None = None


class CallEnd(Contract, frozen=True, kw_only=True, tag="calls.end.v1"):
    """``POST /v1/calls/{call}/end``; ``POST /v1/calls/{call}/seal`` with an optional outcome
    (needed only when the call is still open)."""

    outcome: Outcome | None = None
    reason: Text | None = None
    cause: EndCause | None = None
    """Why a call is ended ``drained`` (:data:`EndCause`); kept only by the request that ends
    the call, like the outcome."""
    at: Timestamp | None = None
    """When the call ended by the writer's clock (a worker's: its session's close), as an
    entry's ``ts`` is. The end comes after the last entries and the recording's last upload,
    seconds later on a busy machine; ``call.ended`` and ``ended_at`` are stamped with ``at``,
    never later than the request's arrival nor earlier than the call's opening. None: when the
    request arrives. Kept only by the request that ends the call."""


class ToolCall(Contract, frozen=True, kw_only=True, tag="calls.tool_call.v1"):
    """``POST /v1/calls/{call}/tools``: run ``name`` once per ``id``; answers its ToolResult."""

    id: Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9_.:-]{1,128}$(?![\s\S])")]
    name: Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9_.-]{1,128}$(?![\s\S])")]
    arguments: dict[str, Any] = {}
    timeout_s: TimeoutS = 10.0
    """The tool's deadline, counted from its ``tool.call`` on the log."""


class ToolAsked(Contract, frozen=True, kw_only=True, tag="calls.tool_asked.v1"):
    """Said on NATS to the app holding the agent, once per tool call id."""

    call: str
    agent: str
    environment: str
    id: str
    name: str
    arguments: dict[str, Any] = {}
    deadline: dt.datetime
    seq: int = 0
    """The seq of its ``tool.call`` entry (0 from a replica of an older release)."""


class ToolAnswer(Contract, frozen=True, kw_only=True, tag="calls.tool_answer.v1"):
    """``POST /v1/calls/{call}/tools/{id}/result``: the app's answer (app key)."""

    result: Any = None
    error: Text | None = None


class ToolResult(Contract, frozen=True, kw_only=True, tag="calls.tool_result.v1"):
    """A tool call's one result, as the log holds it (``error="timeout"`` past its deadline)."""

    call: str
    id: str
    result: Any = None
    error: str | None = None
    seq: int
    """The seq of its ``tool.result`` entry."""


class CallbackRequest(Contract, frozen=True, kw_only=True, tag="calls.callback_request.v1"):
    """``POST /v1/callbacks``: call this caller back (seed 000, "Full, at the endpoint").

    One call back per call: a second request naming the same call is answered with the first.
    """

    agent: AgentField
    number: E164 | None = None
    """The number to dial, E.164: a call back the runtime cannot dial is refused here, not given
    up later (a person's other way of being reached goes in ``contact``)."""
    contact: Text | None = None
    reason: Text = ""
    call: CallIdField | None = None


def callback_of(agent: str, heard: str, *, reason: str, call: str | None) -> CallbackRequest:
    """The call back of a caller heard at ``heard`` (the JobOffer's number or a SIP participant's
    ``sip.phoneNumber``, which need not be E.164): ``number`` when it can be dialled, else kept as
    the ``contact`` (a person can read it; the dialler could only give it up)."""
    if re.match(E164_PATTERN, heard):
        return CallbackRequest(agent=agent, number=heard, reason=reason, call=call)
    return CallbackRequest(agent=agent, contact=heard[:2000], reason=reason, call=call)


class Callback(Contract, frozen=True, kw_only=True, tag="calls.callback.v1"):
    """A call back as call-log holds it (``GET /v1/callbacks``): what the dispatcher's
    follow-ups are made from (issue 18, "Call backs, dialled")."""

    id: int
    """Its row's id in call-log: a follow-up is made once per id."""
    environment: EnvironmentField
    agent: str
    org: str = ""
    """The org of its call, or the one org defining the agent in the environment (a page's call
    back names no call); empty when neither says."""
    call: str | None = None
    number: str | None = None
    contact: str | None = None
    reason: str = ""
    seq: int
    """Its ``callback.requested`` entry's place on the agent's log."""
    requested_at: Timestamp


class CallbackPage(Contract, frozen=True, kw_only=True, tag="calls.callback_page.v1"):
    """``GET /v1/callbacks?since=<ts>&limit=<n>``: call backs of every environment requested at
    or after ``since``, oldest first; ``next`` is the ``since`` of the next page (None: the
    last)."""

    callbacks: list[Callback]
    next: Timestamp | None = None


class AgentEntry(Contract, frozen=True, kw_only=True, tag="calls.agent_entry.v1"):
    """An entry of an agent's log: ``fleet.full`` (a caller refused: the fleet is full),
    ``fleet.refused`` (one refused for another reason: ``data.reason`` ``unheard`` or
    ``cordoned``), ``callback.requested``, ``agent.draining``;
    ``data`` at most :data:`MAX_ENTRY_BYTES` as JSON (422 over it)."""

    kind: Kind
    data: dict[str, Any] = {}
    seq: int = 0
    """Its place on the agent's log (0 in a request: the service gives it)."""
    ts: dt.datetime | None = None
    key: EntryKey | None = None
    """The writer's own id of the entry: written once per agent's log (its environment and
    agent), a second append with the same key answers the first and writes nothing, so a
    writer that re-sends after a crash never doubles it (the follow-ups' dialler's notes)."""


class AgentLog(Contract, frozen=True, kw_only=True, tag="calls.agent_log.v1"):
    """``GET /v1/agents/{agent}/log?after=<seq>``."""

    agent: str
    environment: str
    entries: list[AgentEntry]


class CallEvent(Contract, frozen=True, kw_only=True, tag="calls.event.v1"):
    """Said on NATS as ``call.opened``, ``call.ended`` or ``call.sealed`` (the subject says
    which; ``what`` repeats it) for the other services: the dispatcher clears its offers on
    ``call.opened``."""

    what: Literal["opened", "ended", "sealed"]
    call: str
    agent: str
    environment: str
    room: str
    worker: str
    outcome: Outcome | None = None
    at: dt.datetime
    cause: EndCause | None = None
    """Why the call ended ``drained``, when its ender said (:data:`EndCause`)."""


class LogToken(Contract, frozen=True, kw_only=True, tag="calls.log_token.v1"):
    """``POST /v1/calls/{call}/log-token``: what a page follows its call's stream with
    (``GET /v1/calls/{call}/stream?log_token=…``)."""

    call: str
    token: str
    expires_at: dt.datetime


class Appended(Contract, frozen=True, kw_only=True, tag="calls.appended.v1"):
    """Said on NATS after entries are written: the last seq, so followers read on."""

    call: str
    last_seq: int


PageLimit = Annotated[int, msgspec.Meta(ge=1, le=1000)]


class CallLogRequest(Contract, frozen=True, kw_only=True, tag="calls.log_request.v1"):
    """The ops verb ``calls.log`` over NATS (what ``logs <call>`` reads): the call and its
    entries with seq above ``after``, at most ``limit`` of them."""

    call: CallIdField
    after: Count = 0
    limit: PageLimit = 200


class CallLogPage(Contract, frozen=True, kw_only=True, tag="calls.log_page.v1"):
    """A page of a call's log over NATS: what the call is, and entries in seq order.

    ``more`` says entries with seq above the last one here remain (ask again with ``after``).
    A page is kept under half of NATS's largest message: an entry too large for it alone comes
    with its ``data`` replaced by ``{"omitted_bytes": <n>}`` (read it whole on HTTP,
    ``GET /v1/calls/{call}/entries``). The record's ``config`` is left empty (an agent's whole
    prompt and tools: ``GET /v1/calls/{call}``).
    """

    call: str
    record: CallRecord
    entries: list[LoggedEntry]
    more: bool = False
