"""The written-call engine (seed 002, "A written call"): open or take up a written call through
call-log, and answer a contact's message once per its id.

A *written call* is a call of channel ``chat`` (the web chat) or ``whatsapp`` (a thread), opened
on call-log like a voice call (``CallOpen.channel``, room ``<channel>-<call>``, worker
``chat/<replica>``) and run on its agent's version as the log keeps it on the call's config
(prompt, model, tools; an org that defines no such agent: this service's ``PINECALL_MODEL`` and
no prompt). The model is livekit-agents' Anthropic plugin; the agent's tools are asked of the app
holding the agent through call-log's tool path, once per the model's call id
(:mod:`pinecall_jobs.tools`, the worker's own).

Each contact message is a ``turn.user`` entry ``{text, message, stopped_speaking_at: null}`` and
each reply a ``turn.agent`` entry ``{text, reply_to, first_audio_s: null, …}``, written through
the call's one writer (batches after the writer's count). The message's id is how a message sent
again (a page re-sending after a cut, Meta delivering again) is recognised
(:func:`pinecall_chat.domain.history`): one answered is answered with its reply, written nothing;
one written and not answered (its replica died mid-reply) is answered now, its ``turn.user`` not
written again.

A :class:`WrittenCall` is a *session*: held in memory only while a socket or a thread is served,
rebuilt from the log by :meth:`Conversations.take_up` (the history is the log's turns, nothing
else) on any replica, after any restart. One message of a call is answered at a time, in the
order they came.

A new written call is admitted first when the service has an admission (:class:`Admit`, the
dispatcher's ``POST /v1/written-calls`` with the service key): its org's ``concurrent_calls``,
shared with voice, and whether its agent exists; refused, nothing is opened
(``DispatcherRefused``: 422 ``unknown_agent``, 429 the quota; ``DispatcherUnavailable``).

Two sessions of one call (a page that dialled twice, on two replicas or one) write through the
log's count: the first to write wins, and the other's write is refused whole (409) and it raises
:class:`Superseded` (nothing of it written, nothing doubled).

Errors: ``CallUnknown`` (no such call), ``CallLogRefused`` (call-log refused: another
environment's key, a sealed call), ``CallLogUnavailable``; :class:`Refused` for a call the dial
may not take up (:func:`pinecall_chat.domain.may_take_up`); :class:`NoKey` for an environment
this service holds no fleet key of.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import msgspec
from livekit.agents import ToolError
from livekit.agents.llm import ChatContext, FunctionCall, FunctionCallOutput

from pinecall_chat import domain
from pinecall_clients.calllog import CallLogClient
from pinecall_clients.writer import CallLogWriter
from pinecall_contracts.agents import AgentTool, agent_of
from pinecall_contracts.calls import CallOpen, CallRecord
from pinecall_contracts.dispatch import WrittenAdmission, WrittenAdmitted
from pinecall_contracts.entries import TURN_AGENT, TURN_USER
from pinecall_jobs.tools import AppTool, app_tools, ask_app

_log = logging.getLogger(__name__)

Channel = Literal["chat", "whatsapp"]
MOST_TOOL_ROUNDS = 5
"""Model turns of one reply that may ask tools; the next one is answered without tools."""


Admit = Callable[[WrittenAdmission], Awaitable[WrittenAdmitted]]
"""Admits a written call before it opens (``DispatcherClient.admit_written``), or raises."""


class NoKey(LookupError):
    """This service holds no fleet key of the environment (``PINECALL_FLEET_KEYS``)."""


class Superseded(RuntimeError):
    """Another session of the call wrote on its log first (its count moved under this one's
    writer): nothing of this session's message or reply was written, and it serves no more."""


class Refused(PermissionError):
    """The dial may not take up the call: :attr:`why` (``domain.Refusal``)."""

    def __init__(self, why: domain.Refusal, call: str) -> None:
        super().__init__(f"call {call}: {why}")
        self.why = why


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatAgent:
    """What a written call runs on: its agent's prompt, model and tools."""

    instructions: str
    model: str
    tools: tuple[AgentTool, ...] = ()
    version: int | None = None


def chat_agent(record: CallRecord, default_model: str) -> ChatAgent:
    """The agent's version the call keeps on its config (as the worker's ``call_agent``); none
    (or one that is not an ``AgentVersion``, logged): no prompt, ``default_model``."""
    try:
        kept = agent_of(record.config)
    except msgspec.ValidationError as exc:
        _log.error("call %s: its config's agent is not one (%s)", record.call, exc)
        kept = None
    if kept is None:
        return ChatAgent(instructions="", model=default_model)
    agent = kept.definition
    return ChatAgent(
        instructions=agent.prompt,
        model=agent.model or default_model,
        tools=tuple(agent.tools),
        version=kept.version,
    )


class Model(Protocol):
    """A model's reply, streamed: text deltas, and the tool calls it asks (each once)."""

    def stream(
        self, agent: ChatAgent, context: ChatContext, tools: list[AppTool]
    ) -> AsyncIterator[str | FunctionCall]: ...


@dataclass(slots=True, kw_only=True)
class WrittenCall:
    """One written call's session: what it is, its writer, and its history so far."""

    record: CallRecord
    channel: Channel
    contact: str
    """Who writes: a web visitor's id, or a WhatsApp number."""
    writer: CallLogWriter
    client: CallLogClient
    agent: ChatAgent
    history: domain.History = field(default_factory=domain.History)
    turn: asyncio.Lock = field(default_factory=asyncio.Lock)
    """Held while a message is answered: one at a time, in order."""

    @property
    def call(self) -> str:
        return self.record.call


class Conversations:
    """Written calls of this replica: opened or taken up through call-log, answered once.

    ``logs`` is a call-log client per environment (each with that environment's fleet key);
    ``model`` the model (:class:`AnthropicModel`); ``replica`` names this process on the calls
    it opens (``chat/<replica>``); ``admit`` admits each new call first (None: none is, a
    development set-up with no dispatcher).
    """

    def __init__(
        self,
        logs: Mapping[str, CallLogClient],
        model: Model,
        *,
        replica: str,
        default_model: str = "claude-haiku-4-5",
        admit: Admit | None = None,
    ) -> None:
        self.logs, self.model, self.replica = logs, model, replica
        self.admit = admit
        self.default_model = default_model
        self.opened = self.taken_up = self.answered = self.replayed = 0
        """Counts for metrics: calls opened, sessions taken up, replies made, replies replayed."""

    def client(self, environment: str) -> CallLogClient:
        try:
            return self.logs[environment]
        except KeyError:
            raise NoKey(f"no fleet key of {environment} (PINECALL_FLEET_KEYS)") from None

    async def open(
        self,
        *,
        channel: Channel,
        contact: str,
        agent: str,
        org: str,
        environment: str,
        context: dict[str, Any] | None = None,
        call: str | None = None,
    ) -> WrittenCall:
        """Open a new written call of ``agent`` for ``contact``, admitted first (``admit``);
        the app holding the agent hears ``call.attached`` (call-log's hub, as for a voice
        call). ``call``: its id, when the channel makes its own (a WhatsApp thread's,
        :func:`pinecall_chat.whatsapp_wire.thread_call`); a new one by default."""
        client = self.client(environment)
        call = call or f"call_{secrets.token_hex(10)}"
        if self.admit is not None:
            await self.admit(
                WrittenAdmission(
                    call=call, agent=agent, org=org, environment=environment, channel=channel
                )
            )
        record = await client.open(
            CallOpen(
                call=call,
                agent=agent,
                org=org,
                environment=environment,
                room=f"{channel}-{call}",
                worker=f"chat/{self.replica}",
                context=(context or {}) | {"contact": contact},
                channel=channel,
            )
        )
        self.opened += 1
        return self._session(record, client, channel, contact, domain.History())

    async def take_up(self, call: str, *, environment: str, agent: str, org: str) -> WrittenCall:
        """The session of the open written call ``call``, rebuilt from its log: ``Refused``
        unless it is an open written call of ``agent`` of ``org`` in ``environment``. The app
        holding the agent hears ``call.attached`` again (call-log's ``served``)."""
        client = self.client(environment)
        record = await client.record(call)
        why = domain.may_take_up(record, agent=agent, org=org, environment=environment)
        if why is not None:
            raise Refused(why, call)
        log = await client.entries(call)
        assert record.channel is not None  # may_take_up: a written call
        contact = str(record.context.get("contact") or "")
        await client.served(call)
        self.taken_up += 1
        return self._session(record, client, record.channel, contact, domain.history(log.entries))

    def _session(
        self,
        record: CallRecord,
        client: CallLogClient,
        channel: Channel,
        contact: str,
        history: domain.History,
    ) -> WrittenCall:
        return WrittenCall(
            record=record,
            channel=channel,
            contact=contact,
            writer=client.writer(record.call, written=record.written),
            client=client,
            agent=chat_agent(record, self.default_model),
            history=history,
        )

    async def answer(
        self, call: WrittenCall, message_id: str, text: str
    ) -> AsyncGenerator[str, None]:
        """The agent's reply to ``text`` as text deltas, made as it is made; the message and the
        reply are written once per ``message_id`` (one answered before yields its reply whole,
        and writes nothing). A reply cut off (the caller stops iterating, the process dies) is
        not written: the message is answered again when it is sent again."""
        async with call.turn:
            if (reply := call.history.replies.get(message_id)) is not None:
                self.replayed += 1
                yield reply
                return
            if message_id not in call.history.written:
                call.writer.add(
                    TURN_USER, {"text": text, "message": message_id, "stopped_speaking_at": None}
                )
                await _written(call)
                call.history.add(domain.Turn("user", text, message_id))
            made: list[str] = []
            async for delta in self._reply(call):
                made.append(delta)
                yield delta
            reply = "".join(made)
            call.writer.add(
                TURN_AGENT,
                {
                    "text": reply,
                    "reply_to": message_id,
                    "first_audio_s": None,
                    "llm_ttft_s": None,
                    "tts_ttfb_s": None,
                    "interrupted": False,
                },
            )
            await _written(call)
            call.history.add(domain.Turn("assistant", reply, message_id))
            self.answered += 1

    async def _reply(self, call: WrittenCall) -> AsyncIterator[str]:
        """The model's reply on the call's history, asking its tools of the app (each once per
        the model's call id, through call-log) until it answers in words."""
        context = ChatContext.empty()
        if call.agent.instructions:
            context.add_message(role="system", content=call.agent.instructions)
        for turn in call.history.turns:
            context.add_message(role=turn.role, content=turn.text)
        by_name = {tool.name: tool for tool in call.agent.tools}
        for round_ in range(MOST_TOOL_ROUNDS + 1):
            tools = app_tools(call.client, call.call, call.agent.tools)
            asked: list[FunctionCall] = []
            async for part in self.model.stream(
                call.agent, context, tools if round_ < MOST_TOOL_ROUNDS else []
            ):
                if isinstance(part, str):
                    yield part
                else:
                    asked.append(part)
            if not asked:
                return
            for fn in asked:
                context.items.append(fn)
                context.items.append(await _run(call, by_name.get(fn.name), fn))


async def _written(call: WrittenCall) -> None:
    """Write what is queued, or raise ``Superseded``: the log refused it on its count (409),
    so another session of the call wrote first and this one's view of the log is stale. Two
    sessions of one call (a page that dialled twice) never both write: the first wins."""
    refused = len(call.writer.refused)
    await call.writer.drain()
    if len(call.writer.refused) > refused:
        _, why = call.writer.refused[-1]
        if why.written is None:  # a 409 not about counts: the call was sealed
            raise why
        _log.warning("call %s: another session wrote first: this one stops", call.call)
        raise Superseded(call.call)


async def _run(call: WrittenCall, tool: AgentTool | None, fn: FunctionCall) -> FunctionCallOutput:
    """The tool's output for the model: the app's answer, or the sentence of its failure."""
    try:
        if tool is None:
            raise ToolError(f"there is no tool {fn.name}")
        arguments = json.loads(fn.arguments or "{}")
        if not isinstance(arguments, dict):
            raise ToolError("a tool's arguments are a JSON object")
        output = await ask_app(call.client, call.call, tool, fn.call_id, arguments)
        failed = False
    except ToolError as exc:
        output, failed = exc.message, True
    except json.JSONDecodeError:
        output, failed = "the arguments were not JSON", True
    return FunctionCallOutput(call_id=fn.call_id, name=fn.name, output=output, is_error=failed)
