"""Waiting WhatsApp messages (issue 17; seed 002, "A written call"): written on the agent's log
while nobody holds it, and taken, in the log's order, the moment a socket holds it again.

The agent's log is the backlog: ``message.waiting`` entries with no ``message.taken`` nor
``message.expired`` of the same message (call-log writes each of the three once per message).
Each is let go when its contact's window has closed (judged from the contact's latest message,
``shared/reference/app-socket.md`` §2), else said taken, on the thread's call, by one replica —
the one ``message.taken``'s ``by`` names, whichever wrote it first — which answers it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pinecall_chat.conversation import Conversations, WrittenCall
from pinecall_chat.whatsapp_inbox import Later
from pinecall_chat.whatsapp_wire import window_open
from pinecall_clients.errors import CallLogRefused, CallLogUnavailable, DispatcherRefused
from pinecall_contracts.calls import AgentEntry, AgentLog
from pinecall_contracts.whatsapp import WhatsAppNumberSecrets

log = logging.getLogger("pinecall.chat.whatsapp")

WAITING, TAKEN, EXPIRED = "message.waiting", "message.taken", "message.expired"
AGENT_LOG_PAGE = 10_000
"""The most entries call-log answers of an agent's log at once."""


class WaitingMessages:
    """The backlog's half of :class:`~pinecall_chat.whatsapp_threads.Threads`."""

    engine: Conversations
    numbers: Callable[[str], Awaitable[WhatsAppNumberSecrets | None]]
    clock: Callable[[], float]
    window_s: float
    quota_retry_s: float
    replica: str
    _latest: dict[tuple[str, str], float]
    _draining: dict[tuple[str, str, str], asyncio.Lock]
    _queued: set[str]

    def _queue(self, key: tuple[str, str], item: Any) -> None:
        raise NotImplementedError

    async def _thread(
        self, number: WhatsAppNumberSecrets, contact: str, *, open_new: bool = True
    ) -> WrittenCall | None:
        raise NotImplementedError

    async def _answer(
        self, number: WhatsAppNumberSecrets, contact: str, message_id: str, text: Any
    ) -> WrittenCall:
        raise NotImplementedError

    async def _agent_entry(
        self, environment: str, agent: str, kind: str, data: dict[str, Any]
    ) -> AgentEntry:
        entry = AgentEntry(kind=kind, data=data)
        return await self.engine.client(environment).request(
            f"/v1/agents/{agent}/log?environment={environment}", entry, AgentEntry, within_s=30.0
        )

    async def _take_waiting(self, environment: str, org: str, agent: str) -> None:
        """Put the agent's waiting messages on their threads' queues, in the log's order (one
        drain per agent here at a time), each once: the thread answers it in turn, never beside
        another message or status of its own."""
        lock = self._draining.setdefault((environment, org, agent), asyncio.Lock())
        async with lock:
            try:
                entries = await self._agent_log(environment, agent)
            except (CallLogRefused, CallLogUnavailable) as exc:
                log.warning("the waiting messages of %s were not read: %s", agent, exc)
                return
            done = {e.data.get("message") for e in entries if e.kind in (TAKEN, EXPIRED)}
            waiting = [
                e for e in entries if e.kind == WAITING and e.data.get("message") not in done
            ]
            for entry in waiting:
                stamp = float(entry.data.get("timestamp", 0))
                key = (str(entry.data.get("number")), str(entry.data.get("contact")))
                self._latest[key] = max(self._latest.get(key, 0.0), stamp)
            for entry in waiting:
                message = str(entry.data.get("message"))
                if message not in self._queued:
                    self._queued.add(message)
                    key = (str(entry.data.get("number")), str(entry.data.get("contact")))
                    self._queue(key, Waiting(environment, org, agent, entry))

    async def _still_waiting(self, environment: str, agent: str, message: str) -> AgentEntry | None:
        """The ``message.waiting`` entry of ``message`` when it is neither taken nor let go."""
        entries = await self._agent_log(environment, agent)
        mine = [e for e in entries if e.data.get("message") == message]
        if any(e.kind in (TAKEN, EXPIRED) for e in mine):
            return None
        return next((e for e in mine if e.kind == WAITING), None)

    async def _agent_log(self, environment: str, agent: str) -> list[AgentEntry]:
        """The agent's whole log, page by page (call-log answers 10 000 entries at most)."""
        entries: list[AgentEntry] = []
        while True:
            after = entries[-1].seq if entries else 0
            page = await self.engine.client(environment).request(
                f"/v1/agents/{agent}/log?environment={environment}&after={after}", None,
                AgentLog, within_s=30.0, method="GET",
            )  # fmt: skip
            entries += page.entries
            if len(page.entries) < AGENT_LOG_PAGE:
                return entries

    async def _take(self, waiting: Waiting) -> None:
        """Let a waiting message go (its window closed), or take it and answer it."""
        environment, agent, entry = waiting.environment, waiting.agent, waiting.entry
        data = entry.data
        number_id, contact, message_id = (
            str(data["number"]),
            str(data["contact"]),
            str(data["message"]),
        )
        latest = self._latest.get((number_id, contact), float(data.get("timestamp", 0)))
        if not window_open(latest, self.clock(), self.window_s):
            expired = {"message": message_id, "waiting_seq": entry.seq, "why": "window_closed"}
            await self._agent_entry(environment, agent, EXPIRED, expired)
            return
        number = await self.numbers(number_id)
        if number is None:
            log.warning("waiting message %s: no WhatsApp number %s now", message_id, number_id)
            return
        try:
            session = await self._thread(number, contact)
        except DispatcherRefused as exc:  # admission: the quota waits, an unknown agent goes
            detail = exc.problem.detail or exc.problem.title
            if exc.status == 429:
                raise Later(f"the org's quota: {detail}", self.quota_retry_s) from exc
            if exc.status != 422:
                raise
            gone = {"message": message_id, "waiting_seq": entry.seq, "why": "unknown_agent",
                    "detail": detail}  # fmt: skip
            await self._agent_entry(environment, agent, EXPIRED, gone)
            return
        assert session is not None  # open_new
        taken = {"message": message_id, "call": session.call, "waiting_seq": entry.seq,
                 "by": self.replica}  # fmt: skip
        said = await self._agent_entry(environment, agent, TAKEN, taken)
        if said.data.get("by") != self.replica:  # another replica took it first: its to answer
            return
        text = _TextOf(str(data.get("text", "")))
        await self._answer(number, contact, message_id, text)


@dataclass(frozen=True, slots=True)
class Waiting:
    """A waiting message on its thread's queue."""

    environment: str
    org: str
    agent: str
    entry: AgentEntry


@dataclass(frozen=True, slots=True)
class _TextOf:
    body: str
