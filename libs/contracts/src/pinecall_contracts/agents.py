"""An org's agents as data: the definition an org puts, and the version call-log stores.

Source: issue 16, "Agents, as data"; ``shared/DESIGN.md`` (call-log owns agents). An agent
(``GLOSSARY.md``) is an org's named definition in one environment: its prompt, greeting, voice,
model, language, tools and call limit. Every change is a new *version* (1 for the first); a call
runs the version it opened with.

The numbers an agent is held to are constants here and checked by call-log, which answers 422
naming the rule (a value of the wrong type is a 400, as for every body):

* the prompt: at most :data:`MAX_PROMPT_BYTES` as UTF-8;
* a tool: a name unique in its agent, ``parameters`` a JSON Schema (draft 2020-12) of an object,
  ``timeout_s`` within :data:`TOOL_TIMEOUT_S`;
* the call limit: ``max_call_seconds`` at most :data:`MAX_CALL_SECONDS`, the reaper's ceiling
  (``PINECALL_MAX_CALL_SECONDS``, seed 003), so an agent can shorten its calls, never lengthen
  them past the backstop.

A call keeps the version it opened with in its config, under :data:`CONFIG_AGENT` (call-log
writes it at the open; the worker reads it back with :func:`agent_of`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Annotated, Any

import msgspec

from pinecall_contracts.base import Contract
from pinecall_contracts.calls import AgentField
from pinecall_contracts.ids import ORG_PATTERN, EnvironmentField

MAX_PROMPT_BYTES = 65_536
"""A prompt as UTF-8, at most this many bytes (64 KiB)."""
MAX_CALL_SECONDS = 1800
"""The longest call an agent may ask for, in seconds (seed 003: 30 minutes)."""
TOOL_TIMEOUT_S = (1.0, 120.0)
"""A tool's ``timeout_s``, in seconds: at least the first, at most the second."""
MAX_TOOLS = 64
"""Tools of one agent, at most (a model's tool list, not a catalogue)."""

Org = Annotated[str, msgspec.Meta(pattern=ORG_PATTERN, examples=["org_acme"])]
"""The org an agent is of (a quota's and a ring's ``org``)."""
ToolName = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9_-]{1,64}$(?![\s\S])")]
"""A tool's name as models take it (Anthropic's and OpenAI's tool names: letters, digits,
``_`` and ``-``, 64 at most); a ``ToolCall`` names it."""
PromptHash = Annotated[str, msgspec.Meta(pattern=r"^[0-9a-f]{64}$(?![\s\S])")]
"""The SHA-256 of a prompt's UTF-8, in hex."""
NO_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}}
"""A tool's ``parameters`` when it takes none."""
Word = Annotated[str, msgspec.Meta(max_length=128)]
CONFIG_AGENT = "agent"
"""The key of a call's config (``CallRecord.config``) that holds its agent's
:class:`AgentVersion`, as call-log kept it when the call opened."""


class AgentTool(Contract, frozen=True, kw_only=True, tag="agents.tool.v1"):
    """A tool the agent's model may ask; the app holding the agent answers it."""

    name: ToolName
    """Unique in its agent (422 for a second tool of the same name)."""
    description: Annotated[str, msgspec.Meta(max_length=4096)] = ""
    """What the model is told the tool does."""
    parameters: dict[str, Any] = msgspec.field(default_factory=lambda: dict(NO_PARAMETERS))
    """The JSON Schema (draft 2020-12) of the tool's arguments: an object schema (422 for one
    that is not a valid schema, or not ``"type": "object"``)."""
    timeout_s: float = 10.0
    """Seconds the caller waits for the answer, from its ``tool.call`` on the log; within
    :data:`TOOL_TIMEOUT_S` (422 outside it)."""


class AgentDefinition(Contract, frozen=True, kw_only=True, tag="agents.definition.v1"):
    """``PUT /v1/agents/{agent}``: the whole definition of an org's agent in one environment
    (what ``pinecall-runtime agents put FILE`` reads from YAML or JSON)."""

    name: AgentField
    """The agent's name; the same as the path's (422 otherwise)."""
    prompt: str
    """The model's instructions; at most :data:`MAX_PROMPT_BYTES` as UTF-8 (422 over it)."""
    greeting: Annotated[str, msgspec.Meta(max_length=2000)] | None = None
    """The agent's first line, said before the caller speaks; None: the caller speaks first."""
    voice: Word = ""
    """The voice the agent speaks with (the TTS vendor's voice id); empty: the worker's own."""
    model: Word = ""
    """The model that answers (``claude-sonnet-4-5``); empty: the worker's ``PINECALL_MODEL``."""
    language: Annotated[str, msgspec.Meta(max_length=35)] = "en"
    """The caller's language, a BCP 47 tag (``en``, ``es-MX``)."""
    tools: Annotated[list[AgentTool], msgspec.Meta(max_length=MAX_TOOLS)] = []
    max_call_seconds: int = MAX_CALL_SECONDS
    """The longest a call of this agent runs, in seconds: 1 to :data:`MAX_CALL_SECONDS` (422
    outside it); the same name as the reaper's ceiling."""
    record: bool = False
    """Whether its calls are recorded (issue 19): both sides, in the environment's bucket
    (``PINECALL_RECORDINGS_*``); off unless the org says so, since a recording needs the
    caller's consent, which is the org's to get."""


class AgentVersion(Contract, frozen=True, kw_only=True, tag="agents.version.v1"):
    """One stored version of an agent: what ``PUT``, and ``GET /v1/agents/{agent}``, answer."""

    org: Org
    environment: EnvironmentField
    version: Annotated[int, msgspec.Meta(ge=1)]
    """1 for the first definition; each different definition put is the next."""
    updated_at: dt.datetime
    """When this version was stored (UTC)."""
    prompt_hash: PromptHash
    """SHA-256 of the prompt (hex): what a call's ``call.started`` names."""
    definition: AgentDefinition


class AgentList(Contract, frozen=True, kw_only=True, tag="agents.list.v1"):
    """``GET /v1/agents``: the latest version of each agent of an org in one environment, by
    name."""

    org: Org
    environment: EnvironmentField
    agents: list[AgentVersion] = []


def agent_of(config: Mapping[str, Any]) -> AgentVersion | None:
    """The agent's version a call's ``config`` keeps under :data:`CONFIG_AGENT`; None when it
    keeps none (the org defines no such agent: the worker's own defaults). Raises
    ``msgspec.ValidationError`` for one that is not an :class:`AgentVersion`."""
    kept = config.get(CONFIG_AGENT)
    return None if kept is None else msgspec.convert(kept, AgentVersion)
