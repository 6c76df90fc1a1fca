"""What the model fake answers when no reply is scripted (issue 16, "In the main job": the model
fake asks a tool on some turns, so every ``up`` run exercises tools end to end).

- A request whose last message carries a tool's result (``tool_result`` blocks, as the Messages
  API and livekit-plugins-anthropic send them after a ``tool_use``) is answered by saying that
  result: the model says the answer (or that the tool failed, for ``is_error``).
- Otherwise a *turn* (the caller spoke): on a share of the turns that offer a tool the fake can
  ask, it asks one; on the others it says :data:`DEFAULT_REPLY`. The n-th such turn (from 1)
  asks when ``ceil(n * share) > ceil((n - 1) * share)``: exactly that share, spread evenly, the
  first turn included (share 0.5: turns 1, 3, 5…). The tools it asks rotate over those offered.
  The turns are counted in the order requests reach the fake, so the choice is deterministic
  per turn; a request retried after a fault is a turn of its own.
- A tool it can ask is one that takes arguments (``input_schema`` with ``properties``): the
  fake never asks one that takes none (livekit-agents' ``end_call``: ending a call is the
  caller's to decide). Its arguments are filled from the schema (:func:`arguments`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

DEFAULT_REPLY = (
    "Thanks for asking. Your order left our warehouse this morning and should arrive on "
    "Thursday before noon. Is there anything else I can help you with today?"
)


class ToolUse(msgspec.Struct, frozen=True, kw_only=True):
    """A ``tool_use`` block: the model calls `name` with `input`."""

    name: str
    input: dict[str, Any] = msgspec.field(default_factory=dict)


class Reply(msgspec.Struct, frozen=True, kw_only=True):
    """One answer of the model: text, then optionally a tool call (stop_reason ``tool_use``)."""

    text: str = ""
    tool: ToolUse | None = None


SAID_AT_MOST = 160
"""Characters of a tool's result the fake says (its audio lasts ``len / 15`` s at Cartesia's)."""


def sample(schema: Mapping[str, Any]) -> Any:
    """A value ``schema`` allows: its first ``examples`` entry, its ``default``, its first
    ``enum`` or its ``const``; else one of its ``type`` (a whole number at its ``minimum`` or 1,
    ``"lab"`` for a string, an object's :func:`arguments`)."""
    if isinstance(examples := schema.get("examples"), list) and examples:
        return examples[0]
    for key in ("default", "const"):
        if key in schema:
            return schema[key]
    if isinstance(enum := schema.get("enum"), list) and enum:
        return enum[0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    match kind:
        case "integer":
            return int(schema.get("minimum", 1))
        case "number":
            return float(schema.get("minimum", 1))
        case "string":
            return "lab"
        case "boolean":
            return True
        case "array":
            return []
        case "object":
            return arguments(schema)
    return None


def arguments(schema: Mapping[str, Any]) -> dict[str, Any]:
    """An object's arguments: each required property, and each other one with ``examples``,
    filled by :func:`sample`."""
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return {}
    required = set(schema.get("required") or ())
    return {
        name: sample(prop if isinstance(prop, Mapping) else {})
        for name, prop in properties.items()
        if name in required or (isinstance(prop, Mapping) and "examples" in prop)
    }


def askable(tools: Sequence[Any]) -> list[Mapping[str, Any]]:
    """The request's tools the fake may ask: those taking arguments."""
    return [
        tool
        for tool in tools
        if isinstance(tool, Mapping)
        and isinstance(tool.get("name"), str)
        and isinstance(tool.get("input_schema"), Mapping)
        and tool["input_schema"].get("properties")
    ]


def tool_results(messages: Sequence[Any]) -> list[tuple[str, bool]]:
    """The last message's ``tool_result`` blocks: each result's text and whether it is an
    error; empty when the last message is no tool's result (a caller's turn)."""
    last = messages[-1] if messages else None
    if not isinstance(last, Mapping) or last.get("role") != "user":
        return []
    content = last.get("content")
    if not isinstance(content, list):
        return []
    return [
        (_text(block.get("content")), bool(block.get("is_error")))
        for block in content
        if isinstance(block, Mapping) and block.get("type") == "tool_result"
    ]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(
            b["text"] for b in content if isinstance(b, Mapping) and isinstance(b.get("text"), str)
        )
    return ""


def saying(results: Sequence[tuple[str, bool]]) -> str:
    """What the model says of its tools' results: each one's text, at most
    :data:`SAID_AT_MOST` characters."""
    said = []
    for text, error in results:
        text = text.strip()[:SAID_AT_MOST] or "nothing"
        said.append(f"Sorry, that did not work: {text}" if error else f"Here it is: {text}")
    return " ".join(said)


class Turns:
    """The fake's unscripted answers, with its own count of turns and tools asked."""

    def __init__(self) -> None:
        self.turns = 0
        """Turns heard that offered a tool the fake can ask."""
        self.asked: list[str] = []
        """Each tool asked, by name, in order."""

    def answer(self, body: Mapping[str, Any], share: float) -> Reply:
        """The reply to request ``body`` (a valid Messages API request) when none is scripted,
        asking a tool on ``share`` of the turns that offer one."""
        if results := tool_results(body.get("messages") or []):
            return Reply(text=saying(results))
        tools = askable(body.get("tools") or [])
        if not tools or share <= 0:
            return Reply(text=DEFAULT_REPLY)
        self.turns += 1
        n = self.turns
        if math.ceil(n * share) <= math.ceil((n - 1) * share):
            return Reply(text=DEFAULT_REPLY)
        tool = tools[len(self.asked) % len(tools)]
        self.asked.append(tool["name"])
        return Reply(tool=ToolUse(name=tool["name"], input=arguments(tool["input_schema"])))
