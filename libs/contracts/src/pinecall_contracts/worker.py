"""What a worker's job processes tell its main process, over the datagram socket it binds.

Each call runs in a livekit-agents job process; each tells the worker what its turns say (seed
000, "A worker that is up but bad"): a turn's first audio (``e2e_latency``), an error, how the call
ended. The main process keeps the last minute of it for its heartbeat.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from pinecall_contracts.base import Contract

Outcome = Literal[
    "completed", "caller_hangup", "drained", "timeout", "failed", "overflow", "not_reached"
]
"""How a call ended (seed 002)."""


class TurnMeasured(Contract, frozen=True, kw_only=True, tag="worker.turn.v1"):
    """A turn's first audio: from the caller's end of speech to the agent's first audio out."""

    call: str
    first_audio_s: Annotated[float, msgspec.Meta(ge=0.0, le=600.0)]


class CallError(Contract, frozen=True, kw_only=True, tag="worker.error.v1"):
    """An error entry a call wrote (a vendor failed, a tool failed, …)."""

    call: str
    what: str = ""


class CallEnded(Contract, frozen=True, kw_only=True, tag="worker.ended.v1"):
    """A call ended; ``failed`` when it ended in an error."""

    call: str
    outcome: Outcome
    failed: bool = False


Measure = TurnMeasured | CallError | CallEnded
"""Any datagram of the measures socket (decoded by its ``type`` tag)."""
