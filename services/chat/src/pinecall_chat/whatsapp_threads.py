"""WhatsApp threads (issue 17, "WhatsApp"; seed 002, "A written call"): what the webhook hands on
once it has acknowledged Meta, processed in each thread's arrival order.

- **Once per message**: a message's ``wamid`` is its idempotency key. The written-call engine
  writes and answers a message once per id (:meth:`Conversations.answer`); a delivery this
  replica has seen is not even looked at again.
- **A thread**: a contact's open call with the number's agent, found by its id
  (:func:`~pinecall_chat.whatsapp_wire.thread_call`: the first ordinal whose call is not ended),
  or opened (channel ``whatsapp``). Its session is kept in memory while this replica serves it.
- **Nobody holds the agent**: an agent is held while a call-log replica says one of its app
  sockets takes its calls (``apps.holding``, :class:`~pinecall_contracts.appsocket.Holding`).
  Otherwise the message is written on the agent's log as ``message.waiting`` ``{message,
  number, contact, name, text, timestamp}``, and the moment a replica says the agent is held,
  the waiting messages (those with no ``message.taken`` or ``message.expired``) are answered in
  the log's order, each first said taken, ``message.taken {message, call, waiting_seq}``, or let
  go, ``message.expired {message, waiting_seq, why: "window_closed"}``, when the contact's 24-hour
  window (from its latest message) has closed.
- **Statuses** (sent, delivered, read, failed, in any order) land on the thread's call as
  ``message.status {message, status, timestamp, errors}``, each (message, status) once.
- **Replies** go out through the Graph API (:mod:`.whatsapp_graph`), paced per contact.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pinecall_chat.conversation import Conversations, WrittenCall
from pinecall_chat.whatsapp_graph import Graph, GraphRefused, GraphUnavailable
from pinecall_chat.whatsapp_wire import Message, Notification, Status, thread_call, window_open
from pinecall_clients.errors import CallLogRefused, CallLogUnavailable, CallUnknown
from pinecall_contracts.appsocket import Holding
from pinecall_contracts.calls import AgentEntry, AgentLog
from pinecall_contracts.whatsapp import WhatsAppNumberSecrets

log = logging.getLogger("pinecall.chat.whatsapp")

WAITING, TAKEN, EXPIRED, STATUS = (
    "message.waiting",
    "message.taken",
    "message.expired",
    "message.status",
)
SEEN = 10_000
"""Message ids (and statuses) remembered per replica to drop a delivery seen before."""


@dataclass(frozen=True, slots=True)
class Inbound:
    number: WhatsAppNumberSecrets
    contact: str
    name: str
    message: Message


class Threads:
    """This replica's WhatsApp threads."""

    def __init__(
        self,
        numbers: Callable[[str], Awaitable[WhatsAppNumberSecrets | None]],
        engine: Conversations,
        graph: Graph,
        *,
        window_s: float,
        announce_s: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.numbers = numbers
        """A number's secrets by its id (the webhook's cache of call-log's service route)."""
        self.engine = engine
        self.graph = graph
        self.window_s = window_s
        self.announce_s = announce_s
        self.clock = clock
        """Unix seconds: the window is judged on it (a test moves it)."""
        self.held: dict[str, tuple[float, set[tuple[str, str, str]]]] = {}
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._queues: dict[tuple[str, str], asyncio.Queue[Any]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._sessions: dict[str, WrittenCall] = {}
        self._ordinal: dict[tuple[str, str], int] = {}
        """(number, contact) → the ordinal of its latest thread seen here (ended ones stay so)."""
        self._latest: dict[tuple[str, str], float] = {}
        self._draining: dict[tuple[str, str, str], asyncio.Lock] = {}
        self._drains: set[asyncio.Task[None]] = set()
        self._heard = asyncio.Event()

    # -- who holds an agent ----------------------------------------------------------------

    def holds(self, environment: str, org: str, agent: str) -> bool:
        fresh = time.monotonic() - 3 * self.announce_s
        return any(
            heard >= fresh and (environment, org, agent) in agents
            for heard, agents in self.held.values()
        )

    async def heard(self, holding: Holding) -> None:
        """A call-log replica's ``apps.holding``: the waiting messages of each agent it now
        holds are answered."""
        before = self.held.get(holding.replica, (0.0, set()))[1]
        agents = {(e, o, a) for e, o, a in holding.agents}
        self.held[holding.replica] = (time.monotonic(), agents)
        for environment, org, agent in agents - before:
            self._spawn(self._take_waiting(environment, org, agent), drain=True)
        self._heard.set()

    async def until_held(self, environment: str, org: str, agent: str) -> None:
        """Return once a call-log replica says the agent is held (bound it with a timeout)."""
        while not self.holds(environment, org, agent):
            self._heard.clear()
            await self._heard.wait()

    # -- a webhook, after its 200 ------------------------------------------------------------

    def accept(self, notification: Notification, numbers: dict[str, WhatsAppNumberSecrets]) -> None:
        """Queue each message and status of ``notification`` on its thread, in arrival order
        (``numbers``: the verified numbers it is about; another's changes are not read)."""
        for entry in notification.entry:
            for change in entry.changes:
                number = numbers.get(change.value.metadata.phone_number_id)
                if change.field != "messages" or number is None:
                    continue
                for message in change.value.messages:
                    if self._first(message.id):
                        self._queue(
                            number, message.from_, Inbound(number, message.from_, "", message)
                        )
                for status in change.value.statuses:
                    if self._first(f"{status.id}/{status.status}"):
                        self._queue(number, status.recipient_id, (number, status))

    def _first(self, key: str) -> bool:
        if key in self._seen:
            return False
        self._seen[key] = None
        while len(self._seen) > SEEN:
            self._seen.popitem(last=False)
        return True

    def _queue(self, number: WhatsAppNumberSecrets, contact: str, item: Any) -> None:
        key = (number.number.phone_number_id, contact)
        queue = self._queues.get(key)
        if queue is None:
            queue = self._queues[key] = asyncio.Queue()
            self._spawn(self._serve(queue))
        queue.put_nowait(item)

    def _spawn(self, work: Any, *, drain: bool = False) -> None:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        if drain:
            self._drains.add(task)
            task.add_done_callback(self._drains.discard)

    async def _serve(self, queue: asyncio.Queue[Any]) -> None:
        while True:
            item = await queue.get()
            try:
                if isinstance(item, Inbound):
                    await self._inbound(item)
                else:
                    await self._status(*item)
            except Exception:  # one message's failure must not stop its thread
                log.exception("a WhatsApp item was not processed")
            finally:
                queue.task_done()

    async def settled(self) -> None:
        """Return once every queued message and status is processed (tests, drains)."""
        while True:
            await asyncio.gather(*(q.join() for q in list(self._queues.values())))
            if not self._drains and all(q.empty() for q in self._queues.values()):
                return
            await asyncio.gather(*list(self._drains), return_exceptions=True)

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    # -- messages ------------------------------------------------------------------------

    async def _inbound(self, item: Inbound) -> None:
        n, message = item.number.number, item.message
        key = (n.phone_number_id, item.contact)
        stamp = float(message.timestamp) if message.timestamp.isdigit() else self.clock()
        self._latest[key] = max(self._latest.get(key, 0.0), stamp)
        if not self.holds(n.environment, n.org, n.agent):
            data = {"message": message.id, "number": n.phone_number_id, "contact": item.contact,
                    "text": message.text.body if message.text else "", "timestamp": stamp}  # fmt: skip
            await self._agent_entry(n.environment, n.agent, WAITING, data)
            return
        await self._answer(item.number, item.contact, message.id, message.text)

    async def _answer(
        self, number: WhatsAppNumberSecrets, contact: str, message_id: str, text: Any
    ) -> WrittenCall:
        n = number.number
        session = await self._thread(number, contact)
        assert session is not None  # open_new
        if message_id in session.history.replies:  # answered (and sent) before: not again
            return session
        said = text.body if text is not None else ""
        reply = "".join([part async for part in self.engine.answer(session, message_id, said)])
        if reply.strip():
            try:
                await self.graph.send_text(n.phone_number_id, number.access_token, contact, reply)
            except (GraphRefused, GraphUnavailable) as exc:
                log.warning("a reply to %s was not sent: %s", contact, exc)
        return session

    async def _thread(
        self, number: WhatsAppNumberSecrets, contact: str, *, open_new: bool = True
    ) -> WrittenCall | None:
        """The contact's open call with the number's agent, or a new one (None when there is
        none and not ``open_new``). The record is read each time: a session kept here is used
        only while its call is open and no other replica wrote to it since (its writer's count
        is the log's); otherwise the call is taken up from its log again."""
        n = number.number
        key = (n.phone_number_id, contact)
        ordinal = self._ordinal.get(key, 1)
        client = self.engine.client(n.environment)
        while True:
            call = thread_call(n.phone_number_id, contact, ordinal)
            try:
                record = await client.record(call)
            except CallUnknown:
                if not open_new:
                    return None
                session = await self.engine.open(
                    channel="whatsapp", contact=contact, agent=n.agent, org=n.org,
                    environment=n.environment, call=call,
                    context={"whatsapp": {"number": n.phone_number_id, "contact": contact}},
                )  # fmt: skip
                break
            if record.state == "open":
                kept = self._sessions.get(call)
                if kept is not None and kept.writer.written == record.written:
                    return kept
                session = await self.engine.take_up(
                    call, environment=n.environment, agent=n.agent, org=n.org
                )
                break
            self._sessions.pop(call, None)  # ended: the contact's next thread is the next call
            ordinal += 1
        self._ordinal[key] = ordinal
        self._sessions[call] = session
        return session

    # -- statuses ------------------------------------------------------------------------

    async def _status(self, number: WhatsAppNumberSecrets, status: Status) -> None:
        """On the thread's open call; a status of a thread ended meanwhile opens none."""
        session = await self._thread(number, status.recipient_id, open_new=False)
        if session is None:
            log.info("a status of %s found no open thread: not written", status.id)
            return
        data = {"message": status.id, "status": status.status, "timestamp": status.timestamp,
                "errors": [{"code": e.code, "title": e.title} for e in status.errors]}  # fmt: skip
        async with session.turn:  # not between a message's entries and its reply's
            session.writer.add(STATUS, data)
            await session.writer.drain()

    # -- waiting messages ----------------------------------------------------------------

    async def _agent_entry(
        self, environment: str, agent: str, kind: str, data: dict[str, Any]
    ) -> AgentEntry:
        entry = AgentEntry(kind=kind, data=data)
        return await self.engine.client(environment).request(
            f"/v1/agents/{agent}/log?environment={environment}", entry, AgentEntry, within_s=30.0
        )

    async def _take_waiting(self, environment: str, org: str, agent: str) -> None:
        """Answer the agent's waiting messages, in the log's order (one drain per agent here at
        a time)."""
        lock = self._draining.setdefault((environment, org, agent), asyncio.Lock())
        async with lock:
            try:
                agent_log = await self.engine.client(environment).request(
                    f"/v1/agents/{agent}/log?environment={environment}", None, AgentLog,
                    within_s=30.0, method="GET",
                )  # fmt: skip
            except (CallLogRefused, CallLogUnavailable) as exc:
                log.warning("the waiting messages of %s were not read: %s", agent, exc)
                return
            done = {e.data.get("message") for e in agent_log.entries if e.kind in (TAKEN, EXPIRED)}
            waiting = [
                e
                for e in agent_log.entries
                if e.kind == WAITING and e.data.get("message") not in done
            ]
            for entry in waiting:
                stamp = float(entry.data.get("timestamp", 0))
                key = (str(entry.data.get("number")), str(entry.data.get("contact")))
                self._latest[key] = max(self._latest.get(key, 0.0), stamp)
            for entry in waiting:
                with contextlib.suppress(Exception):
                    await self._take(environment, org, agent, entry)

    async def _take(self, environment: str, org: str, agent: str, entry: AgentEntry) -> None:
        data = entry.data
        number_id, contact, message_id = (
            str(data["number"]),
            str(data["contact"]),
            str(data["message"]),
        )
        if not window_open(self._latest[(number_id, contact)], self.clock(), self.window_s):
            expired = {"message": message_id, "waiting_seq": entry.seq, "why": "window_closed"}
            await self._agent_entry(environment, agent, EXPIRED, expired)
            return
        number = await self.numbers(number_id)
        if number is None:
            log.warning("waiting message %s: no WhatsApp number %s now", message_id, number_id)
            return
        session = await self._thread(number, contact)
        assert session is not None  # open_new
        taken = {"message": message_id, "call": session.call, "waiting_seq": entry.seq}
        await self._agent_entry(environment, agent, TAKEN, taken)
        text = _TextOf(str(data.get("text", "")))
        await self._answer(number, contact, message_id, text)


@dataclass(frozen=True, slots=True)
class _TextOf:
    body: str
