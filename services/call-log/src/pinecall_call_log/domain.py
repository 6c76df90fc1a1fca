"""The call log's pure rules: whether a batch is written, a replay, or refused; the clock clamp;
whether an agent's definition may be stored (issue 16).

Seed 002, "The gateway restarts": a call's log has one writer, which sends its entries in order and
says how many the log already took from it (``after``); the log's head counts them (``written``).

=====================================  ========================================================
the batch (``after``, ``n`` entries)    answer
=====================================  ========================================================
``after == written``, n > 0             written whole under the next seqs (``Write``)
``after == written``, n == 0            nothing to write: the seqs ``[]`` (``Write`` of nothing)
``after + n <= written``, n > 0         the same batch again if each entry is the one the log
                                        took at that place: its seqs, nothing written (``Replay``)
anything else                           409 saying both counts (``Conflict``): a gap
                                        (``after > written``), an overlap (``after < written <
                                        after + n``), an empty batch behind the count, or a
                                        different batch claiming a place already taken
=====================================  ========================================================

It is Kafka's idempotent producer applied to one call (platform notes, "Postgres, the append-only
call log"): the count is the sequence number, the call is the partition.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import jsonschema
import msgspec

from pinecall_contracts.agents import (
    MAX_CALL_SECONDS,
    MAX_PROMPT_BYTES,
    TOOL_TIMEOUT_S,
    AgentDefinition,
)
from pinecall_contracts.calls import (
    MAX_ENTRY_BYTES,
    AgentEntry,
    CallState,
    Entry,
    Outcome,
    entry_bytes,
)
from pinecall_contracts.entries import (
    CALL_RECORDING,
    CALL_RECORDING_FAILED,
    WRITTEN_BY_THE_SERVICE,
    WRITTEN_BY_THE_WORKER,
)


def too_large(entries: Sequence[Entry | AgentEntry]) -> str | None:
    """Why ``entries`` may not be written (one's ``data`` is over ``calls.MAX_ENTRY_BYTES`` as
    JSON), or None: a batch with one such entry is written not at all."""
    for i, entry in enumerate(entries):
        if (size := entry_bytes(entry.data)) > MAX_ENTRY_BYTES:
            return (
                f"entries[{i}] ({entry.kind}): its data is {size} bytes as JSON, over the "
                f"{MAX_ENTRY_BYTES} bytes an entry may hold (calls.MAX_ENTRY_BYTES)"
            )
    return None


def entry_too_large(kind: str, data: Any) -> str | None:
    """Why an entry the service writes for an app (``tool.result``, ``call.command``) may not be
    (its ``data`` over ``calls.MAX_ENTRY_BYTES`` as JSON, the writers' rule), or None."""
    if (size := entry_bytes(data)) > MAX_ENTRY_BYTES:
        return (
            f"{kind}: its data is {size} bytes as JSON, over the {MAX_ENTRY_BYTES} bytes an "
            "entry may hold (calls.MAX_ENTRY_BYTES)"
        )
    return None


def writers_kinds(entries: Sequence[Entry]) -> str | None:
    """Why a writer's ``entries`` may not be written (one of them is of a kind the service owns:
    ``entries.WRITTEN_BY_THE_SERVICE``), or None. Kinds the service does not know pass (a newer
    writer's); its own never do."""
    for i, entry in enumerate(entries):
        if entry.kind in WRITTEN_BY_THE_SERVICE:
            return (
                f"entries[{i}]: {entry.kind} is the call-log's own entry, never a writer's "
                f"(a writer sends {', '.join(sorted(WRITTEN_BY_THE_WORKER))}, or kinds of its own)"
            )
    return None


_encoder = msgspec.json.Encoder(order="sorted")


@dataclass(frozen=True, slots=True)
class Write:
    """Write the batch at the head: it takes the writer's places ``after ..< after + n``."""

    after: int


@dataclass(frozen=True, slots=True)
class Replay:
    """The batch's places were taken before: answer the seqs stored at ``after ..< after + n``
    if the stored entries are this batch's (see :func:`same_entries`), else it is a conflict."""

    after: int
    size: int


@dataclass(frozen=True, slots=True)
class Conflict:
    """Refused whole: ``written`` is the log's count, ``after`` the writer's."""

    written: int
    after: int

    @property
    def detail(self) -> str:
        return (
            f"the log took {self.written} entries from this call's writer;"
            f" the batch follows {self.after}"
        )

    @property
    def counts(self) -> dict[str, int | str]:
        """Both counts, as the problem detail's ``errors`` item the writer reads."""
        return {"path": "$.after", "written": self.written, "after": self.after}


Verdict = Write | Replay | Conflict


def judge(written: int, after: int, size: int) -> Verdict:
    """The verdict on a batch of ``size`` entries after ``after``, at a head counting
    ``written``. Counts are non-negative integers."""
    if after == written:
        return Write(after)
    if size > 0 and after + size <= written:
        return Replay(after, size)
    return Conflict(written, after)


def digest(entry: Entry) -> bytes:
    """16 bytes that tell an entry as its writer sent it (kind, its own ts, data) from another.

    Taken before the clamp, so a replay of the same entry always has the same digest.
    """
    return hashlib.blake2b(_encoder.encode(entry), digest_size=16).digest()


def same_entries(sent: Sequence[bytes], stored: Sequence[bytes]) -> bool:
    """Whether the stored digests at a replay's places are the sent batch's, one for one."""
    return len(sent) == len(stored) and all(a == b for a, b in zip(sent, stored, strict=True))


EARLIEST = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)
"""No entry's ``ts`` is kept earlier than this: a year-1 ``ts`` at ``+14:00`` did not fit in UTC
(a 500), and no call of this runtime happened before it."""


def clamp(ts: dt.datetime, now: dt.datetime) -> dt.datetime:
    """The writer's ``ts`` (aware), in UTC, never later than the service's ``now`` nor earlier
    than :data:`EARLIEST`."""
    return max(min(ts, now), EARLIEST).astimezone(dt.UTC)


OUTCOMES: tuple[Outcome, ...] = (
    "completed",
    "caller_hangup",
    "drained",
    "timeout",
    "failed",
    "overflow",
    "not_reached",
)


def state_of(ended: bool, sealed: bool) -> CallState:
    """``open``, ``ended`` or ``sealed``."""
    return "sealed" if sealed else "ended" if ended else "open"


# -- agents' definitions (issue 16, "Agents, as data") ---------------------------------------


def prompt_hash(prompt: str) -> str:
    """The SHA-256 of ``prompt``'s UTF-8, in hex: what an agent's version and a call name."""
    return hashlib.sha256(prompt.encode()).hexdigest()


WORKER_TOOLS = frozenset({"end_call"})
"""Tools every call's worker adds itself (livekit-agents' ``EndCallTool``): an agent's tool of
the same name would be a second tool the model could not tell apart."""


def definition_refusals(definition: AgentDefinition, name: str) -> list[dict[str, str]]:
    """Every rule ``definition``, put under ``name``, breaks, as problem-detail ``errors``
    (``{"path": "$.tools[1].timeout_s", "message": ...}``); empty when it may be stored. The
    rules are ``pinecall_contracts.agents``': the name the path's, the prompt's bytes, each tool's
    name unique and not the worker's own (``end_call``), its ``parameters`` a JSON Schema (draft 2020-12, ``jsonschema``'s check) of an
    object, its timeout, and the call limit."""
    errors: list[dict[str, str]] = []

    def refuse(path: str, message: str) -> None:
        errors.append({"path": path, "message": message})

    if definition.name != name:
        refuse("$.name", f"the definition is {definition.name!r}'s, put under {name!r}")
    if (size := len(definition.prompt.encode())) > MAX_PROMPT_BYTES:
        refuse("$.prompt", f"{size} bytes as UTF-8, over the {MAX_PROMPT_BYTES} a prompt may hold")
    if not 1 <= definition.max_call_seconds <= MAX_CALL_SECONDS:
        refuse(
            "$.max_call_seconds",
            f"{definition.max_call_seconds} s: a call runs 1 to {MAX_CALL_SECONDS} s",
        )
    low, high = TOOL_TIMEOUT_S
    seen: set[str] = set()
    for i, tool in enumerate(definition.tools):
        at = f"$.tools[{i}]"
        if tool.name in seen:
            refuse(f"{at}.name", f"a second tool named {tool.name!r}: a tool's name is unique")
        if tool.name in WORKER_TOOLS:
            refuse(f"{at}.name", f"{tool.name!r} is the worker's own tool, beside the agent's")
        seen.add(tool.name)
        if not low <= tool.timeout_s <= high:
            refuse(
                f"{at}.timeout_s", f"{tool.timeout_s} s: a tool's timeout is {low:g} to {high:g} s"
            )
        if (why := _not_an_object_schema(tool.parameters)) is not None:
            refuse(f"{at}.parameters", why)
    return errors


def _not_an_object_schema(schema: dict[str, object]) -> str | None:
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        where = "".join(f"[{p!r}]" for p in exc.absolute_path)
        return f"not a JSON Schema (draft 2020-12): {exc.message}" + (
            f" at {where}" if where else ""
        )
    if schema.get("type") != "object":
        return 'a tool\'s arguments are an object: its schema says "type": "object"'
    return None


RecordingOutcome = Literal["completed", "kept", "failed"]
"""What became of a recording: whole in the bucket; only the parts a dead job uploaded kept
(``complete`` false); not completed (``call.recording_failed``)."""


def recording_outcome(entry: Entry) -> RecordingOutcome | None:
    """The outcome ``entry`` says of a recording (issue 19), or None for another kind."""
    if entry.kind == CALL_RECORDING_FAILED:
        return "failed"
    if entry.kind == CALL_RECORDING:
        return "completed" if entry.data.get("complete", True) else "kept"
    return None
