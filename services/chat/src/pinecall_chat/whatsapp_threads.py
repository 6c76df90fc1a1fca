"""WhatsApp threads (issue 17, "WhatsApp"; seed 002, "A written call"): what the webhook hands on
once it has acknowledged Meta, processed in each thread's arrival order.

- **Once per message**: a message's ``wamid`` is its idempotency key. The written-call engine
  writes and answers a message once per id (:meth:`Conversations.answer`); a delivery the
  WhatsApp stream has stored before (its ``Nats-Msg-Id``) is not even looked at again.
- **Durable from the 200 on**: the webhook stores each item on the WhatsApp stream before it
  answers; any replica takes it from there (:mod:`.whatsapp_inbox`), in its thread's order.
- **Admission refused**: at the org's quota (429) a message waits (``message.waiting`` with
  ``why: "quota"``), given again by the stream until a call is admitted, then taken; for an
  agent the dispatcher does not know (422) it is let go (``message.expired``, ``why:
  "unknown_agent"``).
- **A thread**: a contact's open call with the number's agent, found by its id
  (:func:`~pinecall_chat.whatsapp_wire.thread_call`: the first ordinal whose call is not ended),
  or opened (channel ``whatsapp``). Its session is kept in memory while this replica serves it.
- **Nobody holds the agent**: an agent is held while a call-log replica says one of its app
  sockets takes its calls (``apps.holding``, :class:`~pinecall_contracts.appsocket.Holding`).
  Otherwise the message is written on the agent's log as ``message.waiting`` ``{message,
  number, contact, name, text, timestamp}`` (a replica judges that only once it has listened
  to ``apps.holding`` for three announcement periods: until then it waits to hear the agent
  held), and the moment a replica says the agent is held,
  the waiting messages (those with no ``message.taken`` or ``message.expired``) are answered in
  the log's order, each first said taken, ``message.taken {message, call, waiting_seq, by}``
  (written once per message: the replica it names answers it), or let
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
import platform
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import msgspec

from pinecall_chat.conversation import Conversations, WrittenCall
from pinecall_chat.whatsapp_graph import Graph, GraphRefused, GraphUnavailable
from pinecall_chat.whatsapp_inbox import Inbox, Later
from pinecall_chat.whatsapp_waiting import EXPIRED, WAITING, Waiting, WaitingMessages
from pinecall_chat.whatsapp_wire import Message, Status, thread_call
from pinecall_clients.errors import CallUnknown, DispatcherRefused
from pinecall_contracts.appsocket import Holding
from pinecall_contracts.whatsapp import WhatsAppItem, WhatsAppNumberSecrets

log = logging.getLogger("pinecall.chat.whatsapp")

STATUS = "message.status"


@dataclass(frozen=True, slots=True)
class Inbound:
    number: WhatsAppNumberSecrets
    contact: str
    name: str
    message: Message
    delivered: int = 1
    """Deliveries of its stream item so far (more than 1: it may have waited for admission)."""


class Threads(WaitingMessages):
    """This replica's WhatsApp threads."""

    def __init__(
        self,
        numbers: Callable[[str], Awaitable[WhatsAppNumberSecrets | None]],
        engine: Conversations,
        graph: Graph,
        *,
        window_s: float,
        announce_s: float,
        quota_retry_s: float = 10.0,
        inbox: Inbox | None = None,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.numbers = numbers
        """A number's secrets by its id (the webhook's cache of call-log's service route)."""
        self.engine = engine
        self.graph = graph
        self.window_s = window_s
        self.announce_s = announce_s
        self.quota_retry_s = quota_retry_s
        """Seconds before a message refused at its org's quota is tried again."""
        self.inbox = inbox
        """The WhatsApp stream this replica takes its items from (None: tests of the threads)."""
        self.clock = clock
        """Unix seconds: the window is judged on it (a test moves it)."""
        self.monotonic = monotonic
        """Seconds: how fresh an ``apps.holding`` announcement is (a test moves it)."""
        self.replica = f"{platform.node()}.{secrets.token_hex(4)}"
        """Who takes a waiting message (``message.taken``'s ``by``): one replica answers it."""
        self.held: dict[str, tuple[float, set[tuple[str, str, str]]]] = {}
        self._queues: dict[tuple[str, str], asyncio.Queue[Any]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._sessions: dict[str, WrittenCall] = {}
        self._ordinal: dict[tuple[str, str], int] = {}
        """(number, contact) → the ordinal of its latest thread seen here (ended ones stay so)."""
        self._latest: dict[tuple[str, str], float] = {}
        self._draining: dict[tuple[str, str, str], asyncio.Lock] = {}
        self._drains: dict[asyncio.Task[None], tuple[str, str, str]] = {}
        """Drains under way (:meth:`_take_waiting`), and the agent of each."""
        self._queued: set[str] = set()
        """Waiting messages put on their thread's queue here (each once)."""
        self._heard = asyncio.Event()
        self._listening_since = monotonic()
        """When this replica began hearing ``apps.holding`` (:meth:`_until_heard`)."""

    # -- who holds an agent ----------------------------------------------------------------

    def holds(self, environment: str, org: str, agent: str) -> bool:
        fresh = self.monotonic() - 3 * self.announce_s
        return any(
            heard >= fresh and (environment, org, agent) in agents
            for heard, agents in self.held.values()
        )

    async def heard(self, holding: Holding) -> None:
        """A call-log replica's ``apps.holding``: the waiting messages of each agent that was not
        held a moment ago and is now are answered. "Not held" is what :meth:`holds` said, by
        any replica's fresh announcement: an agent whose announcements went stale (a call-log
        replica's loop late past three periods) had its messages written waiting meanwhile, so
        the announcement that makes it fresh again drains them too."""
        agents = {(e, o, a) for e, o, a in holding.agents}
        newly = {scope for scope in agents if not self.holds(*scope)}
        self.held[holding.replica] = (self.monotonic(), agents)
        for scope in newly:
            self._drain(scope)
        self._heard.set()

    async def until_held(self, environment: str, org: str, agent: str) -> None:
        """Return once a call-log replica says the agent is held (bound it with a timeout)."""
        while not self.holds(environment, org, agent):
            self._heard.clear()
            await self._heard.wait()

    async def _until_heard(self, environment: str, org: str, agent: str) -> None:
        """Return once the agent is held, or once this replica has listened to ``apps.holding``
        for three announcement periods (what :meth:`holds` calls fresh): before that, an agent
        not held may be one whose holder was not heard yet. A replica just started took its
        first message as nobody's and wrote it waiting; its drain then took it and, killed
        while answering, left it taken and never answered (test_whatsapp_killed, CI)."""
        left = self._listening_since + 3 * self.announce_s - self.monotonic()
        if left > 0 and not self.holds(environment, org, agent):
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(left):
                    await self.until_held(environment, org, agent)

    # -- an item of the WhatsApp stream ------------------------------------------------------

    async def handle(self, item: WhatsAppItem, delivered: int) -> None:
        """Process one item the webhook stored (:class:`~pinecall_chat.whatsapp_inbox.Inbox`),
        in turn with its thread's other work here; ``delivered``: its deliveries so far (more
        than 1: it may have waited for admission before). Raises what processing raised (the
        inbox asks for the item again on a transient failure or :class:`Later`)."""
        number = await self.numbers(item.number)
        if number is None:
            log.warning("a WhatsApp item of number %s: no such number now: let go", item.number)
            return
        work: Inbound | tuple[WhatsAppNumberSecrets, Status]
        if item.message is not None:
            message = msgspec.convert(item.message, Message)
            work = Inbound(number, item.contact, "", message, delivered)
        elif item.status is not None:
            work = (number, msgspec.convert(item.status, Status))
        else:
            return
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue((item.number, item.contact), (work, done))
        await done

    def _queue(self, key: tuple[str, str], item: Any) -> None:
        """Put ``item`` on thread ``key``'s queue (number, contact): one at a time, in order."""
        queue = self._queues.get(key)
        if queue is None:
            queue = self._queues[key] = asyncio.Queue()
            self._spawn(self._serve(queue))
        queue.put_nowait(item)

    def _spawn(self, work: Any) -> asyncio.Task[None]:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _drain(self, scope: tuple[str, str, str]) -> None:
        """Queue the agent's waiting messages on their threads, soon (:meth:`_take_waiting`)."""
        task = self._spawn(self._take_waiting(*scope))
        self._drains[task] = scope
        task.add_done_callback(self._drains.pop)

    async def _serve(self, queue: asyncio.Queue[Any]) -> None:
        while True:
            queued = await queue.get()
            item, done = queued if isinstance(queued, tuple) else (queued, None)
            try:
                if isinstance(item, Inbound):
                    await self._inbound(item)
                elif isinstance(item, Waiting):
                    await self._take(item)
                else:
                    await self._status(*item)
            except Exception as exc:  # one message's failure must not stop its thread
                if done is None:
                    log.log(
                        logging.INFO if isinstance(exc, Later) else logging.ERROR,
                        "a waiting WhatsApp message was not taken: %r", exc,
                    )  # fmt: skip
                elif not done.done():
                    done.set_exception(exc)
            else:
                if done is not None and not done.done():
                    done.set_result(None)
            finally:
                queue.task_done()

    async def settled(self) -> None:
        """Return once every message and status stored on the WhatsApp stream is processed, by
        any replica, and every waiting message queued here too (tests)."""
        while self.inbox is not None:  # JetStream tells nobody when a stream empties: asked
            if not await self.inbox.pending():
                break
            await asyncio.sleep(0.02)
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
        scope = (n.environment, n.org, n.agent)
        await self._until_heard(*scope)
        if not self.holds(*scope) or scope in self._drains.values():
            # nobody holds it, or the backlog is being queued: it joins the backlog, in order
            await self._agent_entry(n.environment, n.agent, WAITING, _waiting(item, stamp))
            if self.holds(*scope):  # held now: the drain under way may have read before it
                self._drain(scope)
            return
        if (
            item.delivered > 1
            and await self._thread(item.number, item.contact, open_new=False) is None
        ):
            # delivered again with no thread open: it may be waiting since admission refused it
            entry = await self._still_waiting(n.environment, n.agent, message.id)
            if entry is not None:
                await self._take(Waiting(n.environment, n.org, n.agent, entry))
                return
        try:
            await self._answer(item.number, item.contact, message.id, message.text)
        except DispatcherRefused as exc:
            await self._refused(item, stamp, exc)

    async def _refused(self, item: Inbound, stamp: float, exc: DispatcherRefused) -> None:
        """A new thread's call refused at admission: at the org's quota (429), the message
        waits (``message.waiting`` with ``why: "quota"``; :class:`Later`: the stream gives it
        again, and it is taken once a call is admitted); for an agent the dispatcher does not
        know (422, deleted since the number was tied to it), it is let go (``message.expired``
        with ``why: "unknown_agent"``). Another refusal is raised."""
        n, message = item.number.number, item.message
        detail = exc.problem.detail or exc.problem.title
        if exc.status == 429:
            data = _waiting(item, stamp) | {"why": "quota", "detail": detail}
            await self._agent_entry(n.environment, n.agent, WAITING, data)
            raise Later(f"the org's quota: {detail}", self.quota_retry_s) from exc
        if exc.status == 422:
            gone = {"message": message.id, "number": n.phone_number_id, "contact": item.contact,
                    "why": "unknown_agent", "detail": detail}  # fmt: skip
            await self._agent_entry(n.environment, n.agent, EXPIRED, gone)
            return
        raise exc

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


def _waiting(item: Inbound, stamp: float) -> dict[str, Any]:
    """A ``message.waiting`` entry's data: ``{message, number, contact, text, timestamp}``."""
    message = item.message
    return {"message": message.id, "number": item.number.number.phone_number_id,
            "contact": item.contact, "text": message.text.body if message.text else "",
            "timestamp": stamp}  # fmt: skip
