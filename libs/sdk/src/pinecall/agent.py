"""An agent as the app holds it: its tool handlers, its call hooks, and the definition it sends
again on every call handed to it (``call.setup``: the log keeps only the prompt's hash).

Handlers and hooks may be plain functions (run in a thread, so a slow one never stops the
socket's heartbeat) or coroutine functions (run in the app's event loop).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import inspect
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import msgspec
import yaml

from pinecall_contracts.agents import AgentDefinition
from pinecall_contracts.appsocket import AgentRegister

if TYPE_CHECKING:
    from pinecall.call import Call

log = logging.getLogger("pinecall")

CallEvent = Literal["attached", "detached"]
"""When an ``on_call`` hook runs: a call handed to this app, or no longer served by it."""
ToolHandler = Callable[[dict[str, Any], "ToolContext"], Any]
"""``handler(arguments, context)``: returns a JSON-able result (or an awaitable of one)."""
CallHook = Callable[["Call"], Any]
"""``hook(call)``: its return value is ignored."""
F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True, kw_only=True)
class ToolContext:
    """What a tool handler knows of the tool call besides its arguments."""

    call: Call
    """The call that asked (``await context.call.say(...)`` steers it)."""
    id: str
    """The tool call's id: the handler runs once per id, whatever the socket does."""
    name: str
    """The tool's name."""
    deadline: dt.datetime
    """When the caller stops waiting (UTC); a result after it is refused by the server."""


def load_definition(source: AgentDefinition | Mapping[str, Any] | str | Path) -> AgentDefinition:
    """An agent's definition from an ``AgentDefinition``, a mapping of its fields, or a file
    (YAML, or JSON for ``.json``): the same file ``pinecall-runtime agents put`` takes.
    ``ValueError`` naming what is wrong when it is none."""
    if isinstance(source, AgentDefinition):
        return source
    raw: Any = source
    if isinstance(source, str | Path):
        path = Path(source)
        try:
            text = path.read_text()
            raw = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
        except (OSError, ValueError, yaml.YAMLError) as exc:
            raise ValueError(f"{path}: not an agent's definition: {exc}") from exc
    try:
        return msgspec.convert(raw, AgentDefinition)
    except msgspec.ValidationError as exc:
        raise ValueError(f"not an agent's definition: {exc}") from exc


class Agent:
    """One agent the app holds (``app.agent(name)``): register its tools with ``@agent.tool``
    and its hooks with ``@agent.on_call``.

    ``definition`` (optional): what the app sends as ``call.setup`` on each call handed to it,
    its prompt and tools; the server answers whether the prompt is the one the call opened with
    (``Call.prompt_matches``). Without one no ``call.setup`` is sent.
    """

    def __init__(
        self,
        name: str,
        *,
        definition: AgentDefinition | Mapping[str, Any] | str | Path | None = None,
        takes_unclaimed: bool = True,
    ) -> None:
        try:  # the contract's own grammar of an agent's name
            msgspec.convert({"agent": name}, AgentRegister)
        except msgspec.ValidationError as exc:
            raise ValueError(f"{name!r} is not an agent's name: {exc}") from None
        self.name = name
        self.takes_unclaimed = takes_unclaimed
        """False: a console, handed no call (new or parked)."""
        self.definition = None if definition is None else load_definition(definition)
        if self.definition is not None and self.definition.name != name:
            raise ValueError(f"the definition is of {self.definition.name!r}, not {name!r}")
        self.tools: dict[str, ToolHandler] = {}
        self.hooks: dict[CallEvent, list[CallHook]] = {"attached": [], "detached": []}

    def __repr__(self) -> str:
        return f"Agent({self.name!r}, tools={sorted(self.tools)})"

    def tool(self, name: str | None = None) -> Callable[[F], F]:
        """Register the decorated function as the handler of tool ``name`` (the function's name
        when none). It gets ``(arguments, context)``; it returns a JSON-able result, or raises
        (:class:`pinecall.ToolError`'s message is the model's answer; any other exception is
        logged and answered as a failure). It runs once per tool call id."""

        def register(handler: F) -> F:
            tool = name or handler.__name__
            if tool in self.tools:
                raise ValueError(f"{self.name}: a second handler for the tool {tool!r}")
            if self.definition is not None and tool not in {t.name for t in self.definition.tools}:
                log.warning(
                    "%s: the definition has no tool %r: the model never asks it", self.name, tool
                )
            self.tools[tool] = handler
            return handler

        return register

    def on_call(self, event: CallEvent) -> Callable[[F], F]:
        """Register the decorated function to run with the :class:`pinecall.Call` when a call is
        ``"attached"`` to this app (new, handed from another process, or parked) or
        ``"detached"`` (ended, drained, or lost with the socket). Its exceptions are logged."""
        if event not in self.hooks:
            raise ValueError(f"on_call takes 'attached' or 'detached', not {event!r}")

        def register(hook: F) -> F:
            self.hooks[event].append(hook)
            return hook

        return register

    def unhandled(self) -> list[str]:
        """The definition's tools with no handler (each asked is answered with an error)."""
        if self.definition is None:
            return []
        return [t.name for t in self.definition.tools if t.name not in self.tools]


async def call_maybe_async(function: Callable[..., Any], *args: Any) -> Any:
    """``function(*args)``: awaited when it is a coroutine function, else run in a thread (a
    blocking handler never holds up the socket); an awaitable it returns is awaited."""
    if inspect.iscoroutinefunction(function):
        return await function(*args)
    result = await asyncio.to_thread(function, *args)
    if inspect.isawaitable(result):
        result = await result
    return result
