"""The simulated caller's wire: ``POST /v1/evals/voice`` (issue 18, "The simulated caller").

A tenant (its app key) or an operator asks the runtime to ring one of an org's agents with a
caller of its own: the caller says :attr:`VoiceEval.script`'s lines one by one with the
environment's voice, listens with the environment's ears, and hangs up on ``call.ended`` or once
the agent answered its last line. :class:`VoiceEvalResult` is what it heard; the same document
is written on the agent's log as an ``eval.voice`` entry (:data:`EVAL_VOICE`).
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Final, Literal

import msgspec

from pinecall_contracts.base import Contract
from pinecall_contracts.calls import AgentField, CallIdField
from pinecall_contracts.ids import EnvironmentField
from pinecall_contracts.plain import means

EVAL_VOICE: Final = "eval.voice"
"""The agent log's kind of a simulated caller's result (``data``: a :class:`VoiceEvalResult`)."""
MAX_LINES: Final = 10
MAX_LINE_CHARS: Final = 300

Line = Annotated[
    str,
    msgspec.Meta(
        min_length=1,
        max_length=MAX_LINE_CHARS,
        pattern=means(r"^[\s\S]*\S[\s\S]*$(?![\s\S])", "a line with something to say"),
    ),
]
"""A line the caller says: something to say (a line of blanks was said as silence)."""

EvalOutcome = Literal[
    "completed", "ended", "overflow", "unanswered", "silent", "room_gone", "failed"
]
"""How a simulated call went, from the caller's side:

- ``completed``: the agent answered every line; the caller hung up;
- ``ended``: ``call.ended`` came before the script was done (the agent ended the call, or the
  call was drained): :attr:`VoiceEvalResult.call_outcome` says how it ended;
- ``overflow``: the fleet's overflow answered (no seat), not the agent: no line was said;
- ``unanswered``: no agent joined the room in time;
- ``silent``: an agent joined but a line got no audio back in time (the caller hung up);
- ``room_gone``: the room was taken down under the caller;
- ``failed``: the caller's own voice failed (its vendor refused or did not answer a line)."""


class VoiceEval(Contract, frozen=True, kw_only=True, tag="evals.voice.v1"):
    """``POST /v1/evals/voice``: ring ``org``'s ``agent`` and say ``script``."""

    agent: AgentField
    org: Annotated[
        str, msgspec.Meta(pattern=r"^([A-Za-z0-9][A-Za-z0-9_.:-]{0,127})?$(?![\s\S])")
    ] = ""
    script: Annotated[list[Line], msgspec.Meta(min_length=1, max_length=MAX_LINES)]
    """The caller's lines, said in order, each once the agent answered the one before (the
    first once the agent's greeting, if any, is over); at least one (400 otherwise)."""
    environment: EnvironmentField | None = None
    """An operator key names it; an app key's is its own (another is 403)."""


class EvalTurn(Contract, frozen=True, kw_only=True, tag="evals.turn.v1"):
    """One turn: a line said and what the agent answered."""

    said: str
    """The caller's line (empty for the agent's greeting, which no line asked for)."""
    heard: str
    """What the caller's ears transcribed of the agent's answer (the environment's speech to
    text; empty when nothing was transcribed)."""
    first_audio_ms: int | None
    """From the end of the line to the agent's first audio as the caller received it, in
    milliseconds (for the greeting: from the agent's join); None when no audio came."""


class VoiceEvalResult(Contract, frozen=True, kw_only=True, tag="evals.voice_result.v1"):
    """What the simulated caller heard: the answer of ``POST /v1/evals/voice``, and the data of
    its ``eval.voice`` entry on the agent's log."""

    call: CallIdField
    room: str
    agent: str
    org: str
    environment: str
    outcome: EvalOutcome
    turns: list[EvalTurn]
    """The greeting first when the agent spoke before the first line, then one per line said."""
    answered_by: str | None = None
    """The ``lk.agent_name`` of the agent that joined (a worker's, or ``<fleet>/overflow``)."""
    call_outcome: str | None = None
    """The call's outcome as ``call.ended`` said it, when the caller heard it."""
    started_at: dt.datetime
    ended_at: dt.datetime
