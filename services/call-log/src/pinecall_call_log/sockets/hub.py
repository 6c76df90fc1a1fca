"""This replica's app sockets, the agents each holds and the calls each serves.

Invariants: a call is held by at most one socket (:attr:`Hub.holder`); ``call.attached`` is the
first frame a socket gets about a call, and a tool call reaches a socket at most once
(:attr:`AppSocket.sent`). A *parked* call is an open call of an agent that no socket holds: it
is not kept anywhere but found in Postgres (the agent's open calls) when a socket registers the
agent, so a call opened while nobody held its agent is parked too. Every change of hands is made
without an await between the choice and the record of it, so two hand-overs of one call cannot
interleave in this replica's loop.
"""

from __future__ import annotations

import asyncio
from typing import Literal

from pinecall_call_log.settings import CallLogSettings
from pinecall_call_log.sockets.rules import pick_holder
from pinecall_call_log.store import Store
from pinecall_contracts.appsocket import (
    AgentDraining,
    AgentRegistered,
    CallAttached,
    CallDetached,
    Close,
    ToApp,
    ToolCallFrame,
)
from pinecall_contracts.base import encode
from pinecall_contracts.calls import CallRecord
from pinecall_servicekit import db
from pinecall_servicekit.changes import Changes

Scope = tuple[str, str]
"""(environment, org): what a socket acts for."""
Why = Literal["new", "handed", "parked"]


class AppSocket:
    """One app process's socket as the hub sees it: what it holds, and the frames waiting to be
    written to it (at most ``queue_frames``; one more closes it :attr:`Close.SLOW_CONSUMER`)."""

    def __init__(self, scope: Scope, instance: str, queue_frames: int) -> None:
        self.environment, self.org = scope
        self.instance = instance
        self.agents: dict[str, bool] = {}
        """Agents registered, and whether each takes unclaimed calls."""
        self.draining: set[str] = set()
        self.calls: dict[str, str] = {}
        """Calls held, and their agent."""
        self.sent: set[tuple[str, str]] = set()
        """(call, tool id) of every ``tool.call`` sent here: sent once; answerable here."""
        self.outbox: asyncio.Queue[bytes] = asyncio.Queue(queue_frames)
        self.closing: tuple[int, str] | None = None
        self.closed = asyncio.Event()
        """Set when a close is asked for (by the hub or the reader); the route closes."""

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.environment, self.org, self.instance)

    def takes(self, agent: str) -> bool:
        """Whether this socket would take a call of ``agent`` now (new, handed or parked)."""
        return self.agents.get(agent, False) and agent not in self.draining

    def send(self, frame: ToApp) -> None:
        """Queue ``frame``; a full queue closes the socket as a slow consumer (its calls are
        handed over; the next holder replays what it needs from the log)."""
        if self.closing is not None:
            return
        try:
            self.outbox.put_nowait(encode(frame))
        except asyncio.QueueFull:
            self.close(Close.SLOW_CONSUMER, "the app reads too slowly")

    def close(self, code: int, reason: str) -> None:
        """Ask the route to close the socket with ``code`` (the first reason asked wins)."""
        if self.closing is None:
            self.closing = (code, reason)
        self.closed.set()


class Hub:
    """The sockets of one replica; the call log tells it of calls opened, tools asked and calls
    ended, the route of sockets come and gone."""

    def __init__(self, settings: CallLogSettings, store: Store, replica: str) -> None:
        self.settings = settings
        self.store = store
        self.replica = replica
        self.sockets: dict[tuple[str, str, str], AppSocket] = {}
        self.holder: dict[str, AppSocket] = {}
        """Call → the socket serving it."""
        self.attached_before: set[str] = set()
        """Calls some socket of this replica held (so ``claimed`` on their next attach)."""
        self.handed = 0
        """Calls handed from a socket that closed or drained to another, for metrics."""
        self.changes = Changes()
        """Notified when sockets come, go or register (for tests and ops)."""

    # -- sockets --------------------------------------------------------------------------

    async def join(self, socket: AppSocket) -> None:
        """Add ``socket``; one of the same instance is replaced (closed 4009, its calls handed)."""
        old = self.sockets.get(socket.key)
        self.sockets[socket.key] = socket
        if old is not None:
            old.close(Close.REPLACED, "a newer socket of the same instance")
            await self._let_go(old)
        await self.changes.notify()

    async def leave(self, socket: AppSocket) -> None:
        """``socket`` closed, however: its calls are parked and handed at once."""
        if self.sockets.get(socket.key) is socket:
            del self.sockets[socket.key]
        await self._let_go(socket)
        await self.changes.notify()

    async def _let_go(self, socket: AppSocket) -> None:
        calls = list(socket.calls.items())
        socket.calls.clear()
        socket.agents.clear()
        for call, _ in calls:
            if self.holder.get(call) is socket:
                del self.holder[call]
        for call, agent in calls:
            await self._hand(call, agent, socket.environment, socket.org)

    def holding(self, environment: str, org: str, agent: str) -> list[AppSocket]:
        """The sockets that would take a call of the agent, earliest registered first."""
        return [
            s
            for s in self.sockets.values()
            if (s.environment, s.org) == (environment, org) and s.takes(agent)
        ]

    # -- calls ----------------------------------------------------------------------------

    def _pick(self, environment: str, org: str, agent: str) -> AppSocket | None:
        return pick_holder((s, len(s.calls)) for s in self.holding(environment, org, agent))

    async def opened(self, record: CallRecord) -> None:
        """A call just opened: handed to a socket holding its agent, or parked."""
        socket = self._pick(record.environment, record.org, record.agent)
        if socket is not None:
            await self._attach(socket, record, "new")

    async def _hand(self, call: str, agent: str, environment: str, org: str) -> bool:
        """Hand a call its socket let go of to another; False when it stays parked."""
        record = await self.store.calls.record(call)
        socket = self._pick(environment, org, agent)
        if socket is None or record is None or record.state != "open" or call in self.holder:
            return False
        await self._attach(socket, record, "handed")
        self.handed += 1
        return True

    async def _attach(self, socket: AppSocket, record: CallRecord, why: Why) -> None:
        """``call.attached``, then every tool call of it still waiting (each once)."""
        call = record.call
        socket.calls[call] = record.agent
        self.holder[call] = socket
        socket.send(
            CallAttached(
                call=call,
                agent=record.agent,
                app=socket.instance,
                started=record.opened_at,
                state=record.state,
                seq=record.last_seq,
                claimed=call in self.attached_before,
                why=why,
            )
        )
        self.attached_before.add(call)
        for tool in await self.store.held.waiting_tools(call, db.utcnow()):
            self.tool_asked(
                ToolCallFrame(
                    call=call,
                    id=tool.id,
                    name=tool.name,
                    arguments=tool.arguments,
                    deadline=tool.deadline,
                    seq=tool.seq,
                )
            )

    async def register(self, socket: AppSocket, agent: str, takes_unclaimed: bool) -> None:
        """``socket`` holds ``agent``: ``agent.registered`` saying how many parked calls
        follow, then each as ``call.attached`` (none for a console)."""
        parked = []
        if takes_unclaimed:
            opened = await self.store.held.open_calls(socket.org, socket.environment, agent)
            parked = [r for r in opened if r.call not in self.holder]
        socket.agents[agent] = takes_unclaimed
        socket.draining.discard(agent)
        socket.send(
            AgentRegistered(agent=agent, environment=socket.environment, parked=len(parked))
        )
        for record in parked:
            if socket.closing is None and record.call not in self.holder:
                await self._attach(socket, record, "parked")
        await self.changes.notify()

    def tool_asked(self, frame: ToolCallFrame) -> bool:
        """Send a tool call to the socket holding its call, once; False when none holds it (it
        waits in the log for the next holder, who hears it after ``call.attached``)."""
        socket = self.holder.get(frame.call)
        if socket is None:
            return False
        if (frame.call, frame.id) not in socket.sent:
            socket.sent.add((frame.call, frame.id))
            socket.send(frame)
        return True

    def ended(self, call: str, seq: int) -> None:
        """The call ended: its socket hears ``call.detached`` and holds it no more."""
        socket = self.holder.pop(call, None)
        self.attached_before.discard(call)
        if socket is not None:
            socket.calls.pop(call, None)
            socket.send(CallDetached(call=call, why="ended", seq=seq))

    async def drain(self, socket: AppSocket, agent: str) -> AgentDraining:
        """``agent.drain``: no new call to ``socket``; each it holds of ``agent`` is detached and
        handed to another socket or parked; ``agent.draining`` lands on the agent's log."""
        socket.draining.add(agent)
        mine = [c for c, a in socket.calls.items() if a == agent]
        handed = 0
        for call in mine:
            del socket.calls[call]
            del self.holder[call]
            record = await self.store.calls.record(call)
            socket.send(
                CallDetached(call=call, why="drained", seq=record.last_seq if record else 0)
            )
            handed += await self._hand(call, agent, socket.environment, socket.org)
        data = {
            "app": socket.instance,
            "environment": socket.environment,
            "handed": handed,
            "parked": len(mine) - handed,
        }
        entry = await self.store.agents.append(
            socket.environment, agent, "agent.draining", data, db.utcnow()
        )
        await self.changes.notify()
        return AgentDraining(
            agent=agent,
            environment=socket.environment,
            app=socket.instance,
            handed=handed,
            parked=len(mine) - handed,
            seq=entry.seq,
        )

    def close_all(self) -> None:
        """The replica stops: every socket is closed 1001 (reconnect to any replica)."""
        for socket in list(self.sockets.values()):
            socket.close(Close.GOING_AWAY, "the replica is stopping")
