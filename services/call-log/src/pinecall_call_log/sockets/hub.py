"""This replica's app sockets, the agents each holds and the calls each serves, and how the
replicas hand calls to each other.

Invariants: a call is held by at most one socket on any replica (its ``app_holds`` row, claimed
before ``call.attached`` is sent); ``call.attached`` is the first frame a socket gets about a
call, and a tool call reaches a socket at most once (:attr:`AppSocket.sent`). A *parked* call is
an open call with no hold: a socket that registers its agent, on any replica, is handed it.

A tool call runs in one app process at a time (acceptance 3, "tools it is running still
answer"): a socket that drains a call keeps the tool calls it was sent and has not answered (a
``tool_holds`` row each), and the call's next holder is not sent them. When that socket closes
with one still unanswered, the tool call is said again on NATS and reaches whichever socket
holds the call then (after its ``call.attached``), within what is left of its deadline.

Between replicas (NATS, ``pinecall_contracts.subjects``): each replica says every
``app_announce_s`` which agents its sockets take (``apps.holding``); a call that no socket here
takes is asked of a replica that says it does (``apps.hand``, request/reply). Every replica hears
every tool call asked and sends those of the calls it holds; every call ended, and detaches it.
A replica not heard for three announcements is taken for dead: one survivor takes its holds back
(a delete that returns them) and hands each call again.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import time
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
    HandCall,
    Handed,
    Holding,
    ToApp,
    ToolCallFrame,
)
from pinecall_contracts.base import decode, encode
from pinecall_contracts.calls import CallEvent, CallRecord, ToolAsked
from pinecall_servicekit import calltrace, db
from pinecall_servicekit.bus import Bus
from pinecall_servicekit.changes import Changes
from pinecall_servicekit.errors import PinecallError

log = logging.getLogger("pinecall.call_log.sockets")

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
        self.kept: set[tuple[str, str]] = set()
        """(call, tool id) of the tool calls this socket runs for calls it drained (each a
        ``tool_holds`` row): no other socket is sent them while it is open."""
        self.outbox: asyncio.Queue[bytes] = asyncio.Queue(queue_frames)
        self.busy = asyncio.Lock()
        """Held by a drain and by the socket's leave: a leave waits for a drain under way."""
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
    ended, the route of sockets come and gone, the other replicas (NATS) of theirs."""

    def __init__(self, settings: CallLogSettings, store: Store, bus: Bus, replica: str) -> None:
        self.settings = settings
        self.store = store
        self.bus = bus
        self.replica = replica
        self.sockets: dict[tuple[str, str, str], AppSocket] = {}
        self.holder: dict[str, AppSocket] = {}
        """Call → the socket of this replica serving it."""
        self.attached_before: set[str] = set()
        """Calls some socket of this replica held (so ``claimed`` on their next attach)."""
        self.remote: dict[str, tuple[float, set[tuple[str, str, str]]]] = {}
        """Another replica → when it was last heard (monotonic s) and the agents it takes."""
        self.handed = 0
        """Calls handed from a socket that closed or drained to another, for metrics."""
        self.changes = Changes()
        """Notified when sockets come, go or register, and replicas are heard (tests, ops)."""
        self._started = time.monotonic()
        self._tasks: list[asyncio.Task[None]] = []
        self._subscriptions: list[object] = []

    # -- between replicas -----------------------------------------------------------------

    async def start(self) -> None:
        """Listen to the other replicas and start saying what this one holds."""
        subjects = self.bus.subjects
        self._subscriptions = [
            await self.bus.subscribe(subjects.apps_holding, Holding, self._heard),
            await self.bus.subscribe(subjects.tools_asked, ToolAsked, self._asked),
            await self.bus.subscribe(subjects.call_events("ended"), CallEvent, self._ended),
            await self.bus.client.subscribe(subjects.app_hand(self.replica), cb=self._hand_here),
        ]
        self._tasks.append(asyncio.create_task(self._announcing(), name="app-holding"))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for subscription in self._subscriptions:
            with contextlib.suppress(Exception):  # NATS may be gone already
                await subscription.unsubscribe()  # type: ignore[attr-defined]

    def _taken(self) -> set[tuple[str, str, str]]:
        return {
            (s.environment, s.org, agent)
            for s in self.sockets.values()
            for agent in s.agents
            if s.takes(agent)
        }

    async def announce(self) -> None:
        """Say which agents this replica's sockets take (at once after a change)."""
        holding = Holding(replica=self.replica, agents=sorted(self._taken()))
        with contextlib.suppress(PinecallError):  # said again within a period
            await self.bus.publish(self.bus.subjects.app_holding(self.replica), holding)

    async def _announcing(self) -> None:
        period = self.settings.app_announce_s
        while True:
            try:
                await self.announce()
                await self._take_back(period)
            except PinecallError as exc:
                log.warning("app holds not announced or taken back: %s", exc)
            await asyncio.sleep(period)

    def _alive(self, period: float) -> list[str]:
        now = time.monotonic()
        for replica, (heard, _) in list(self.remote.items()):
            if now - heard > 3 * period:
                del self.remote[replica]
        return [self.replica, *self.remote]

    async def _take_back(self, period: float) -> None:
        """Hand again the calls of replicas not heard for three periods (once this one has
        listened that long: a replica just started has heard nobody yet)."""
        if time.monotonic() - self._started < 3 * period:
            return
        before = db.utcnow() - dt.timedelta(seconds=3 * period)
        alive = self._alive(period)
        for call, _, _, _ in await self.store.held.take_back(alive, before):
            await self._hand(call)
        await self._ask_again(await self.store.held.take_back_tools(alive, before))

    async def _heard(self, holding: Holding) -> None:
        if holding.replica != self.replica:
            self.remote[holding.replica] = (time.monotonic(), set(holding.agents))
            await self.changes.notify()

    def takers(self, environment: str, org: str, agent: str) -> list[str]:
        """Other replicas whose sockets take calls of the agent, as last heard."""
        fresh = time.monotonic() - 3 * self.settings.app_announce_s
        return [
            replica
            for replica, (heard, agents) in self.remote.items()
            if heard >= fresh and (environment, org, agent) in agents
        ]

    async def _hand_here(self, msg: object) -> None:
        """``apps.hand``: another replica asks a socket of this one to take a call."""
        request = decode(msg.data, HandCall)  # type: ignore[attr-defined]
        attached = False
        with contextlib.suppress(PinecallError):
            record = await self.store.calls.record(request.call)
            if record is not None and request.again:
                attached = self._attached_again(record)
            else:
                attached = record is not None and await self._place_here(record, request.why)
        await msg.respond(encode(Handed(attached=attached)))  # type: ignore[attr-defined]

    async def _asked(self, asked: ToolAsked) -> None:
        if asked.call in self.holder and asked.seq > 0:
            self.tool_asked(
                ToolCallFrame(
                    call=asked.call, id=asked.id, name=asked.name, arguments=asked.arguments,
                    deadline=asked.deadline, seq=asked.seq,
                )
            )  # fmt: skip

    async def _ended(self, event: CallEvent) -> None:
        if event.call in self.holder:
            record = await self.store.calls.record(event.call)
            await self.ended(event.call, record.last_seq if record else 0)

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
        await self.announce()
        await self.changes.notify()

    async def _let_go(self, socket: AppSocket) -> None:
        async with socket.busy:
            await self._let_go_now(socket)

    async def _let_go_now(self, socket: AppSocket) -> None:
        calls = list(socket.calls)
        socket.calls.clear()
        socket.agents.clear()
        for call in calls:
            if self.holder.get(call) is socket:
                del self.holder[call]
        for call in calls:
            await self.store.held.release(call, self.replica)
        for call in calls:
            await self._hand(call)
        kept, socket.kept = sorted(socket.kept), set()
        await self._ask_again(
            await self.store.held.let_go_tools(self.replica, socket.instance, kept)
        )

    def holding(self, environment: str, org: str, agent: str) -> list[AppSocket]:
        """The sockets here that would take a call of the agent, earliest registered first."""
        return [
            s
            for s in self.sockets.values()
            if (s.environment, s.org) == (environment, org) and s.takes(agent)
        ]

    # -- calls ----------------------------------------------------------------------------

    def _pick(self, environment: str, org: str, agent: str) -> AppSocket | None:
        return pick_holder((s, len(s.calls)) for s in self.holding(environment, org, agent))

    async def opened(self, record: CallRecord) -> None:
        """A call just opened: handed to a socket holding its agent (here or on another
        replica), or parked."""
        await self._place(record, "new")

    async def _hand(self, call: str) -> bool:
        """Hand a call its socket let go of to another; False when it stays parked."""
        record = await self.store.calls.record(call)
        if record is None or not await self._place(record, "handed"):
            return False
        self.handed += 1
        return True

    async def _place(self, record: CallRecord, why: Why) -> bool:
        """Attach the call to a socket here, or ask a replica whose sockets take its agent."""
        if await self._place_here(record, why):
            return True
        for replica in self.takers(record.environment, record.org, record.agent):
            try:
                answer = await self.bus.request(
                    self.bus.subjects.app_hand(replica),
                    HandCall(call=record.call, why=why),
                    Handed,
                )
            except PinecallError:
                continue
            if answer.attached:
                return True
        return False

    async def served(self, record: CallRecord) -> bool:
        """The call is served anew (a written call's session taken up on another chat replica):
        the socket holding it, on whichever replica, hears ``call.attached`` again (``again``);
        one no socket holds is placed as a parked call is. False when no socket took it (none
        holds the agent, or the call is not open)."""
        if record.state != "open":
            return False
        holder = await self.store.held.holder(record.call)
        if holder is None:
            return await self._place(record, "parked")
        if holder == self.replica:
            return self._attached_again(record)
        try:
            answer = await self.bus.request(
                self.bus.subjects.app_hand(holder),
                HandCall(call=record.call, why="handed", again=True),
                Handed,
            )
        except PinecallError:
            return False  # its replica is gone: its holds are taken back and handed soon
        return answer.attached

    def _attached_again(self, record: CallRecord) -> bool:
        socket = self.holder.get(record.call)
        if socket is None or socket.closing is not None:
            return False
        socket.send(
            CallAttached(
                call=record.call,
                agent=record.agent,
                app=socket.instance,
                started=record.opened_at,
                state=record.state,
                seq=record.last_seq,
                claimed=True,
                why="handed",
                again=True,
            )
        )
        return True

    async def _place_here(self, record: CallRecord, why: Why) -> bool:
        if record.state != "open":
            return False
        for _ in range(3):  # a socket may leave while the hold is claimed: the next one
            socket = self._pick(record.environment, record.org, record.agent)
            if socket is None:
                return False
            if await self._attach(socket, record, why):
                return True
        return False

    async def _attach(self, socket: AppSocket, record: CallRecord, why: Why) -> bool:
        """Claim the call's hold, then ``call.attached`` and every tool call of it still
        waiting (each once). False when another socket holds it, or this one left meanwhile."""
        call = record.call
        if call in self.holder:
            return False
        if not await self.store.held.claim(record, self.replica, socket.instance, db.utcnow()):
            return False
        if call in self.holder or not socket.takes(record.agent) or socket.closing is not None:
            if call not in self.holder:
                await self.store.held.release(call, self.replica)
            return False
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
                claimed=why != "new" and (why == "handed" or call in self.attached_before),
                why=why,
                traceparent=calltrace.call_traceparent(record.environment, record.room),
            )
        )
        self.attached_before.add(call)
        for tool in await self.store.held.waiting_tools(call, db.utcnow()):  # none kept elsewhere
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
        return True

    async def register(self, socket: AppSocket, agent: str, takes_unclaimed: bool) -> None:
        """``socket`` holds ``agent``: ``agent.registered`` saying how many parked calls
        follow, then each as ``call.attached`` (none for a console)."""
        parked = []
        if takes_unclaimed:
            parked = await self.store.held.parked_calls(socket.org, socket.environment, agent)
        socket.agents[agent] = takes_unclaimed
        socket.draining.discard(agent)
        socket.send(
            AgentRegistered(agent=agent, environment=socket.environment, parked=len(parked))
        )
        for record in parked:
            await self._attach(socket, record, "parked")
        await self.announce()
        await self.changes.notify()

    async def asked_again(self, frame: ToolCallFrame) -> None:
        """A retry of a tool call asked before (a worker's on this replica): sent to the socket
        here holding its call if it was not sent there, and no draining socket still runs it."""
        socket = self.holder.get(frame.call)
        if socket is None or (frame.call, frame.id) in socket.sent:
            return
        if not await self.store.held.tool_kept(frame.call, frame.id):
            self.tool_asked(frame)

    async def answered(self, socket: AppSocket, call: str, tool: str) -> None:
        """``socket`` answered a tool call (its result, or the one written before, is on the
        log): a hold it had on it goes."""
        if (call, tool) in socket.kept:
            socket.kept.discard((call, tool))
            await self.store.held.let_go_tools(self.replica, socket.instance, [(call, tool)])

    async def _ask_again(self, tools: list[tuple[str, str]]) -> None:
        """Tool calls a socket ran and let go of unanswered: said again on NATS (``tools.asked``,
        with their deadline), so the replica holding each call sends it to its socket once; a
        parked call's next holder is sent them after ``call.attached``."""
        for call in sorted({c for c, _ in tools}):
            record = await self.store.calls.record(call)
            if record is None or record.state != "open":
                continue
            ids = {tool for c, tool in tools if c == call}
            for tool in await self.store.held.waiting_tools(call, db.utcnow()):
                if tool.id not in ids:
                    continue
                asked = ToolAsked(
                    call=call, id=tool.id, name=tool.name, arguments=tool.arguments,
                    deadline=tool.deadline, seq=tool.seq, agent=record.agent,
                    environment=record.environment,
                )  # fmt: skip
                with contextlib.suppress(PinecallError):  # its next holder reads it from the log
                    await self.bus.publish(
                        self.bus.subjects.tool_asked(record.environment, record.agent), asked
                    )

    def tool_asked(self, frame: ToolCallFrame) -> bool:
        """Send a tool call to the socket here holding its call, once; False when none here
        holds it (another replica's may: each hears every tool call asked; none: it waits in
        the log for the next holder, who hears it after ``call.attached``)."""
        socket = self.holder.get(frame.call)
        if socket is None:
            return False
        if (frame.call, frame.id) not in socket.sent:
            socket.sent.add((frame.call, frame.id))
            socket.send(frame)
        return True

    async def ended(self, call: str, seq: int) -> None:
        """The call ended: its socket hears ``call.detached`` and holds it no more."""
        socket = self.holder.pop(call, None)
        self.attached_before.discard(call)
        if socket is not None:
            socket.calls.pop(call, None)
            socket.send(CallDetached(call=call, why="ended", seq=seq))
            await self.store.held.release(call, self.replica)

    async def drain(self, socket: AppSocket, agent: str) -> AgentDraining:
        """``agent.drain``: no new call to ``socket``; each it holds of ``agent`` is detached and
        handed to another socket or parked, without the tool calls ``socket`` runs (they stay
        with it: kept before the hold goes, so no holder is sent them); ``agent.draining``
        lands on the agent's log. Run to its end even when the socket goes meanwhile (the
        route shields it; the socket's leave waits for it)."""
        async with socket.busy:
            return await self._drain_now(socket, agent)

    async def _drain_now(self, socket: AppSocket, agent: str) -> AgentDraining:
        socket.draining.add(agent)
        await self.announce()
        mine = [c for c, a in socket.calls.items() if a == agent]
        for call in mine:  # no tool call of them reaches this socket from now on
            del socket.calls[call]
            del self.holder[call]
        handed = 0
        for call in mine:
            running = [
                tool.id
                for tool in await self.store.held.waiting_tools(call, db.utcnow(), held=True)
                if (call, tool.id) in socket.sent
            ]
            if running:  # said on the socket first: its leave lets go of what was written
                socket.kept.update((call, tool) for tool in running)
                await self.store.held.keep_tools(
                    call, running, self.replica, socket.instance, db.utcnow()
                )
            await self.store.held.release(call, self.replica)
            record = await self.store.calls.record(call)
            socket.send(
                CallDetached(call=call, why="drained", seq=record.last_seq if record else 0)
            )
            handed += await self._hand(call)
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
