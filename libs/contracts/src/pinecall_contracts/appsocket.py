"""The app socket's frames and close codes: ``WS /v1/apps/socket`` on call-log (issue 16).

Source: seed 002, "A call is its agent's, not a socket's", "A process that leaves on purpose",
"The gateway restarts"; ``shared/reference/app-socket.md`` §4 (the proposed wire it follows).

One socket per app *process*, multiplexed by call. The app dials in with its app key
(``Authorization: Bearer``) and the subprotocol :data:`SUBPROTOCOL` (the major version); its first
frame is :class:`Hello` (the minor versions it speaks, its stable instance id, its org), answered
by :class:`Welcome` (the version chosen, the server's limits). Frames are JSON text, one tagged
object each (``"type"``: the seed's frame name and its version, ``"call.attached.v1"``). Every
per-call frame names its ``call``; every frame that reflects a log entry carries that entry's
``seq``. Frames only grow: a new field has a default, unknown fields are ignored.

============================  =====  =========================================================
frame                         dir    meaning
============================  =====  =========================================================
``hello`` / ``welcome``       A→R/R→A  versions, instance, org / version, limits
``ping`` / ``pong``           A→R/R→A  the app's heartbeat (any frame counts as one)
``agent.register``            A→R    hold an agent (``takes_unclaimed: false``: a console)
``agent.registered``          R→A    how many parked calls follow as ``call.attached``
``call.attached``             R→A    always the first frame about a call; its waiting tool calls follow
``call.setup`` / ``call.ready``  A→R/R→A  the call's whole prompt and tools again; its hash
``tool.call``                 R→A    a tool call to answer, once per id, within ``deadline``
``tool.result``               A→R    the answer, written once per id
``tool.result.ack``           R→A    the result the log holds (``duplicate``: an earlier one)
``call.command`` / ``.ack``   A→R/R→A  ``say`` or ``end``, once per app-minted id
``agent.drain`` / ``agent.draining``  A→R/R→A  no new calls; held calls handed or parked
``call.detached``             R→A    this socket no longer serves the call
``error``                     R→A    a frame refused (nothing written); ``fatal`` before a close
============================  =====  =========================================================

Errors are frames and the socket goes on (an unknown type, malformed JSON, a result for a call
the socket does not hold); what ends the socket is a close code, all of them in :class:`Close`.
Whatever closed a socket, its calls are parked and handed at once to another socket that takes
unclaimed calls of their agent, or to the next that registers it.
"""

from __future__ import annotations

import datetime as dt
from enum import IntEnum
from typing import Annotated, Any, Literal

import msgspec

from pinecall_contracts.agents import AgentTool, Org, PromptHash
from pinecall_contracts.base import Contract
from pinecall_contracts.calls import AgentField, CallIdField, CallState, Seq, Text
from pinecall_contracts.ids import EnvironmentField

SUBPROTOCOL = "pinecall.app.v1"
"""``Sec-WebSocket-Protocol``: the app socket's major version."""
VERSIONS = (1,)
"""The minor versions this side speaks; ``welcome.version`` is the highest both speak."""

InstanceId = Annotated[
    str, msgspec.Meta(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$(?![\s\S])", examples=["web-1"])
]
"""An app process's stable id: the same after a reconnect, so the old socket is replaced."""
FrameId = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9_.:-]{1,128}$(?![\s\S])")]
"""A tool call's id (the runtime's) or a command's (the app's): the key it is done once by."""


class Close(IntEnum):
    """Every close code of the app socket, in one place (RFC 6455 keeps 4000-4999 private).

    Whatever the code, the socket's calls are parked and handed over; an app reconnects after
    any of them except :attr:`BAD_KEY`, :attr:`NO_COMMON_VERSION` and :attr:`AGENT_OUT_OF_SCOPE`
    (it would be refused again).
    """

    NORMAL = 1000
    """The app closed, or the server after the app's close."""
    GOING_AWAY = 1001
    """The replica is stopping: reconnect at once, to any replica."""
    TOO_BIG = 1009
    """A frame over ``welcome.limits.max_frame_bytes`` (RFC 6455's "message too big")."""
    PROTOCOL = 4000
    """A frame out of order: anything but ``hello`` first, a second ``hello``, a binary frame."""
    BAD_KEY = 4001
    """No app key, one that is not good, or a key of another kind."""
    NO_COMMON_VERSION = 4002
    """The subprotocol is not :data:`SUBPROTOCOL`, or ``hello.versions`` shares none."""
    AGENT_OUT_OF_SCOPE = 4003
    """``agent.register`` names an agent the org does not define in the key's environment."""
    SLOW_CONSUMER = 4008
    """The app read too slowly: more than ``limits.queue_frames`` frames were waiting for it."""
    REPLACED = 4009
    """A newer socket said the same ``instance`` (the process reconnected)."""
    MISSED_HEARTBEAT = 4010
    """Nothing heard for two ``heartbeat_s``."""
    INTERNAL = 1011
    """The server failed on a frame (a defect of ours, logged): reconnect."""


class Limits(msgspec.Struct, frozen=True, kw_only=True):
    """What the server holds a socket to (``welcome.limits``)."""

    max_frame_bytes: int
    """A frame from the app, at most this many bytes of UTF-8 (over it: close 1009)."""
    queue_frames: int
    """Frames waiting to be read by the app, at most (over it: close 4008)."""


class Hello(Contract, frozen=True, kw_only=True, tag="hello.v1"):
    """The app's first frame."""

    versions: Annotated[list[int], msgspec.Meta(min_length=1, max_length=16)]
    """The minor versions of ``pinecall.app.v1`` the app speaks."""
    instance: InstanceId
    """The process's stable id (a second socket saying it replaces the first: close 4009)."""
    org: Org
    """The org the app is (keys carry no org yet: the socket names it)."""
    sdk: Annotated[str, msgspec.Meta(max_length=128)] = ""
    """The SDK and its version, for the operator's eyes."""


class Welcome(Contract, frozen=True, kw_only=True, tag="welcome.v1"):
    """The answer to ``hello``: the version chosen and the server's limits."""

    version: int
    instance: InstanceId
    environment: EnvironmentField
    """The key's environment: every agent the socket registers is of it."""
    replica: str
    """The call-log replica holding the socket (for the operator's eyes)."""
    heartbeat_s: float
    """Send a frame (``ping`` when nothing else) at least this often, in seconds; nothing heard
    for twice as long closes 4010."""
    limits: Limits


class Ping(Contract, frozen=True, kw_only=True, tag="ping.v1"):
    """The app's heartbeat; answered with ``pong``."""

    t: float | None = None
    """Anything the app wants echoed (its clock, say)."""


class Pong(Contract, frozen=True, kw_only=True, tag="pong.v1"):
    t: float | None = None


class AgentRegister(Contract, frozen=True, kw_only=True, tag="agent.register.v1"):
    """Hold ``agent`` (of the hello's org, in the key's environment)."""

    agent: AgentField
    takes_unclaimed: bool = True
    """False for a console: it is never handed a call, new or parked."""


class AgentRegistered(Contract, frozen=True, kw_only=True, tag="agent.registered.v1"):
    """The agent is held; ``parked`` calls follow, each as ``call.attached``."""

    agent: AgentField
    environment: EnvironmentField
    parked: int


class CallAttached(Contract, frozen=True, kw_only=True, tag="call.attached.v1"):
    """This socket serves the call from now on: always the first frame about a call, followed
    by every ``tool.call`` of it still waiting for an answer."""

    call: CallIdField
    agent: AgentField
    app: InstanceId
    """The instance now holding the call (this socket's)."""
    started: dt.datetime
    """When the call opened (UTC)."""
    state: CallState
    seq: int
    """The call's log head as the call was attached."""
    claimed: bool
    """True when a socket held the call before (it comes handed or parked): the app sends
    ``call.setup`` again, as the log keeps only the prompt's hash."""
    why: Literal["new", "handed", "parked"] = "new"
    """new: it just opened; handed: its socket closed or drained while another held the
    agent; parked: it waited for this socket to register."""
    again: bool = False
    """True when this socket held the call already and hears it again because the call is
    served anew (a written call's session taken up by another chat replica after a cut,
    ``POST /v1/calls/{call}/served``): ``why`` is ``handed``, ``claimed`` True."""
    traceparent: str | None = None
    """The W3C ``traceparent`` of the call's trace (an app may go on in it); None from a replica
    that sends none."""


class CallSetup(Contract, frozen=True, kw_only=True, tag="call.setup.v1"):
    """The call's whole prompt and tools, sent again after ``call.attached``."""

    call: CallIdField
    prompt: str
    tools: list[AgentTool] = []


class CallReady(Contract, frozen=True, kw_only=True, tag="call.ready.v1"):
    """``call.setup`` heard: the prompt's hash, and whether the call opened with it."""

    call: CallIdField
    seq: int
    prompt_hash: PromptHash
    matches: bool
    """False when the call's ``call.started`` named another prompt's hash."""


class ToolCallFrame(Contract, frozen=True, kw_only=True, tag="tool.call.v1"):
    """A tool call to answer once, before ``deadline``; sent once per id to a socket."""

    call: CallIdField
    id: FrameId
    name: str
    arguments: dict[str, Any] = {}
    deadline: dt.datetime
    """When the worker stops waiting (UTC): its ``tool.call`` plus the tool's ``timeout_s``."""
    seq: Seq
    """The seq of the ``tool.call`` entry."""
    traceparent: str | None = None
    """The W3C ``traceparent`` of the worker's request for this tool call, in the call's trace
    (an app's handler may go on in it); None when the frame is sent again from the store, or by
    a replica that sends none."""


class ToolResultFrame(Contract, frozen=True, kw_only=True, tag="tool.result.v1"):
    """The app's answer: ``result``, or ``error`` (a sentence the model can speak around)."""

    call: CallIdField
    id: FrameId
    result: Any = None
    error: Text | None = None


class ToolResultAck(Contract, frozen=True, kw_only=True, tag="tool.result.ack.v1"):
    """Where the tool call's one result landed; ``duplicate``: an earlier answer was kept (or
    the timeout, when the deadline had passed: then an ``error`` frame says so first)."""

    call: CallIdField
    id: FrameId
    seq: Seq
    duplicate: bool
    result: Any = None
    error: str | None = None


class CallCommand(Contract, frozen=True, kw_only=True, tag="call.command.v1"):
    """Steer the call: ``say`` a sentence, or ``end`` it; done once per app-minted ``id``."""

    call: CallIdField
    id: FrameId
    kind: Literal["say", "end"]
    text: Text | None = None
    """What to say (``say`` needs it); for ``end``, what the agent says last, if anything."""


class CallCommandAck(Contract, frozen=True, kw_only=True, tag="call.command.ack.v1"):
    """The command is on the call's log (a ``call.command`` entry at ``seq``) for the worker to
    follow; ``duplicate``: the same id was written before, and nothing was written now."""

    call: CallIdField
    id: FrameId
    seq: Seq
    duplicate: bool


class AgentDrain(Contract, frozen=True, kw_only=True, tag="agent.drain.v1"):
    """Take no new call of ``agent`` (every agent of the socket when none); the calls held go to
    another socket or wait parked. The socket still holds the agent: tools it runs answer."""

    agent: AgentField | None = None


class AgentDraining(Contract, frozen=True, kw_only=True, tag="agent.draining.v1"):
    """The drain done for one agent; the same is written on the agent's log."""

    agent: AgentField
    environment: EnvironmentField
    app: InstanceId
    handed: int
    """Calls handed to another socket."""
    parked: int
    """Calls left waiting for the next socket that registers the agent."""
    seq: int
    """The seq of the ``agent.draining`` entry on the agent's log."""


class CallDetached(Contract, frozen=True, kw_only=True, tag="call.detached.v1"):
    """This socket no longer serves the call."""

    call: CallIdField
    why: Literal["ended", "drained"]
    seq: int
    """The call's log head then."""


ErrorCode = Literal[
    "malformed",
    "unknown_type",
    "not_held",
    "past_deadline",
    "unknown",
    "conflict",
    "invalid",
    "unavailable",
]


class ErrorFrame(Contract, frozen=True, kw_only=True, tag="error.v1"):
    """A frame refused, nothing of it written. ``re`` names what it was about (a call, a tool
    call's or command's id); ``fatal`` when a close follows."""

    code: ErrorCode
    """malformed: not JSON, or a field of the wrong shape; unknown_type: a ``type`` this
    version does not know; not_held: a call this socket does not hold (or another org's;
    ``re`` names the call, for a ``tool.result`` as for a ``call.command``);
    past_deadline: a tool result after its deadline; unknown: no such tool call; conflict:
    the call is over; invalid: a command without what it needs, a drain of an agent not
    registered; unavailable: Postgres did not answer (send it again)."""
    message: str
    re: str | None = None
    fatal: bool = False


FromApp = Hello | Ping | AgentRegister | CallSetup | ToolResultFrame | CallCommand | AgentDrain
"""Every frame an app sends (decode with ``msgspec.json.decode(data, type=FromApp)``)."""
ToApp = (
    Welcome
    | Pong
    | AgentRegistered
    | CallAttached
    | CallReady
    | ToolCallFrame
    | ToolResultAck
    | CallCommandAck
    | AgentDraining
    | CallDetached
    | ErrorFrame
)
"""Every frame the runtime sends."""


# -- between call-log replicas, on NATS (``Subjects.app_holding``, ``Subjects.app_hand``) ----


class Holding(Contract, frozen=True, kw_only=True, tag="apps.holding.v1"):
    """A replica's app sockets, said every ``app_announce_s``: the agents some socket of it
    takes calls of, as ``[environment, org, agent]``. A replica not heard for three of them is
    taken for dead: its holds are taken back and its calls handed again."""

    replica: str
    agents: list[tuple[str, str, str]] = []


class HandCall(Contract, frozen=True, kw_only=True, tag="apps.hand_call.v1"):
    """Hand ``call`` to one of your sockets (``why``: as ``call.attached`` says)."""

    call: CallIdField
    why: Literal["new", "handed", "parked"] = "new"
    again: bool = False
    """The call is served anew: the socket of yours holding it hears ``call.attached`` again
    (``again`` True); no other socket takes it."""


class Handed(Contract, frozen=True, kw_only=True, tag="apps.handed.v1"):
    """The answer to :class:`HandCall`: whether a socket of the replica took the call."""

    attached: bool
