"""What a call runs on: its agent's version, as the log kept it when the call opened, over the
worker's own defaults (issue 16, "The worker runs the call's agent").

A call's config (``CallRecord.config``) holds the version of its agent the call opened with
(``pinecall_contracts.agents.agent_of``); a call whose org defines no such agent, or one the log
has not opened yet, runs on the worker's settings (``PINECALL_INSTRUCTIONS``, ``PINECALL_MODEL``,
the plugins' voice and language). Each field the version leaves empty is the worker's.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import msgspec

from pinecall_contracts.agents import AgentTool, agent_of
from pinecall_contracts.calls import CallRecord
from pinecall_worker.settings import WorkerSettings

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class CallAgent:
    """The call's prompt, first line, voice, model, language, tools and limit."""

    instructions: str
    greeting: str | None = None
    """Said first when set; None: the caller speaks first."""
    voice: str | None = None
    """The Cartesia voice id; None: the plugin's own."""
    model: str
    """The Anthropic model."""
    language: str | None = None
    """A BCP 47 tag for the ears and the voice; None: each plugin's own."""
    tools: tuple[AgentTool, ...] = ()
    """Tools the app holding the agent answers (beside the worker's own ``end_call``)."""
    max_call_seconds: float
    """Seconds from the call's open to its last sentence."""
    version: int | None = None
    """The agent's version (None: the worker's defaults)."""
    record: bool = False
    """Whether the call is recorded (the agent's ``record``; the worker's defaults do not)."""


def call_agent(settings: WorkerSettings, record: CallRecord | None) -> CallAgent:
    """What the call of ``record`` runs on (``record`` None: the log has not opened it yet, so
    the worker's defaults). A config whose agent is not an ``AgentVersion`` (a defect of the log)
    is logged and the defaults are run: the caller is answered either way."""
    defaults = CallAgent(
        instructions=settings.instructions,
        model=settings.model,
        max_call_seconds=settings.max_call_seconds,
    )
    if record is None:
        return defaults
    try:
        kept = agent_of(record.config)
    except msgspec.ValidationError as exc:
        _log.error(
            "call %s: its config's agent is not one (%s); the defaults run", record.call, exc
        )
        return defaults
    if kept is None:
        return defaults
    agent = kept.definition
    return CallAgent(
        instructions=agent.prompt or settings.instructions,
        greeting=agent.greeting or None,
        voice=agent.voice or None,
        model=agent.model or settings.model,
        language=agent.language or None,
        tools=tuple(agent.tools),
        max_call_seconds=min(float(agent.max_call_seconds), settings.max_call_seconds),
        version=kept.version,
        record=agent.record,
    )
