"""The WhatsApp stream (issue 17, "WhatsApp": Meta does not deliver again after a 2xx, so what it
was told 200 for must outlive the replica that said it): webhook-ingest's pattern
(``shared/DESIGN.md``, "The wire").

- **Stored before 200**: the webhook puts each verified message and status on the stream
  ``<ns>_whatsapp`` (:meth:`Inbox.put`), subject ``<ns>.whatsapp.thread.<number>.<contact>``,
  ``Nats-Msg-Id`` the message's wamid (a status's ``<wamid>/<status>``), so a delivery Meta makes
  again within :data:`DUPLICATE_WINDOW_S` is stored once; JetStream not storing it is
  ``BusUnavailable``, a 503, and Meta delivers again.
- **Taken by one replica**: every chat replica pulls from the one durable consumer
  ``chat-whatsapp``, and acknowledges an item once it is processed; a replica that dies holding
  one has it given to another after ``ack_wait_s`` (held longer while it works: ``in_progress``
  every third of it). :class:`Later` and a transient failure (a service unavailable, another
  session having written first) ask for it again, later (``nak`` with a delay), never drop it;
  any other failure is logged and the item let go, as a thread's item always was.
- **Per-thread order across replicas**: the stream is a work queue, so an item is gone from it
  once acknowledged, and the first item a thread's subject still holds is the one to process
  next. A replica processes an item only when it is that first one (else it asks for it again
  :data:`ORDER_WAIT_S` later); on one replica, items of a thread are handled one at a time
  (:class:`~pinecall_servicekit.stream.Keyed`), checked and acknowledged under the same lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

import msgspec
import nats.errors
import nats.js.errors
from nats.aio.msg import Msg
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from pinecall_chat.conversation import Superseded
from pinecall_clients.errors import Unavailable
from pinecall_contracts.base import decode
from pinecall_contracts.whatsapp import WhatsAppItem
from pinecall_servicekit.bus import Bus
from pinecall_servicekit.errors import BusUnavailable
from pinecall_servicekit.stream import Keyed, fetch_one

log = logging.getLogger("pinecall.chat.whatsapp")

DUPLICATE_WINDOW_S = 86_400.0
"""How long the stream remembers an item's id, in seconds (a day; past it, the written-call
engine still answers a message once per wamid)."""
MAX_AGE_S = 2 * 86_400.0
"""How long an item no replica processed is kept, in seconds (past the 24-hour window, a message
could not be answered anyway)."""
ORDER_WAIT_S = 0.1
"""Seconds before an item behind another of its thread is asked for again."""
MOST_HELD = 64
"""Items one replica works on at once (each thread's one at a time)."""

Handler = Callable[[WhatsAppItem, int], Awaitable[None]]
"""Processes an item; its second argument is how many times it was delivered (1 the first)."""


class Later(Exception):
    """The item cannot be processed now (an org at its quota): ask for it again in ``delay_s``."""

    def __init__(self, why: str, delay_s: float) -> None:
        super().__init__(why)
        self.delay_s = delay_s


TRANSIENT = (Unavailable, BusUnavailable, Superseded)
"""Failures an item is asked for again after (``retry_s``), never dropped over."""


class Inbox:
    """One replica's end of the WhatsApp stream: puts items on it, and takes its share off."""

    def __init__(self, bus: Bus, *, ack_wait_s: float = 30.0, retry_s: float = 2.0) -> None:
        self.bus = bus
        self.ack_wait_s = ack_wait_s
        self.retry_s = retry_s
        self._keyed = Keyed()
        self._room = asyncio.Semaphore(MOST_HELD)
        self._tasks: set[asyncio.Task[None]] = set()
        self._loop: asyncio.Task[None] | None = None

    async def ensure(self) -> None:
        """Make the stream if it is missing (every replica, at start)."""
        subjects = self.bus.subjects
        await self.bus.ensure_stream(
            subjects.whatsapp_stream,
            [subjects.whatsapp_threads],
            duplicate_window_s=DUPLICATE_WINDOW_S,
            max_age_s=MAX_AGE_S,
            work_queue=True,
        )

    async def put(self, item: WhatsAppItem, msg_id: str) -> bool:
        """Store ``item`` on its thread's subject; True when stored, False when the stream had
        ``msg_id`` already. ``BusUnavailable`` when JetStream did not say it stored it."""
        subject = self.bus.subjects.whatsapp_thread(item.number, item.contact)
        try:
            return await self.bus.publish_once(subject, item, msg_id=msg_id)
        except nats.errors.Error as exc:  # closed, draining, no servers: not stored
            raise BusUnavailable(f"JetStream did not store a WhatsApp item: {exc!r}") from exc

    async def pending(self) -> int:
        """Items the stream holds: none processed yet, or one in hand (tests, ``settled``)."""
        info = await self.bus.js.stream_info(self.bus.subjects.whatsapp_stream)
        return int(info.state.messages)

    async def start(self, handler: Handler) -> None:
        """Bind the shared durable consumer and take items with ``handler`` until :meth:`aclose`."""
        subjects = self.bus.subjects
        config = ConsumerConfig(
            durable_name=subjects.whatsapp_consumer,
            ack_policy=AckPolicy.EXPLICIT,
            deliver_policy=DeliverPolicy.ALL,
            ack_wait=self.ack_wait_s,
            max_deliver=-1,  # an item behind its thread's first is asked for again, for ever
            max_ack_pending=MOST_HELD * 4,
        )
        sub = await self.bus.js.pull_subscribe(
            subjects.whatsapp_threads,
            durable=subjects.whatsapp_consumer,
            stream=subjects.whatsapp_stream,
            config=config,
        )
        self._loop = asyncio.create_task(self._taking(sub, handler), name="whatsapp-inbox")

    async def _taking(
        self, sub: nats.js.JetStreamContext.PullSubscription, handler: Handler
    ) -> None:
        try:
            while True:
                await self._room.acquire()
                try:
                    msg = await fetch_one(sub, client=self.bus.client)
                except Exception as exc:  # NATS lost, the consumer gone: it comes back
                    self._room.release()
                    log.warning("the WhatsApp consumer could not fetch: %r", exc)
                    await asyncio.sleep(self.retry_s)  # the connection reconnects by itself
                    continue
                if msg is None:
                    self._room.release()
                    continue
                task = asyncio.create_task(self._handle(msg, handler))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
        finally:
            with contextlib.suppress(Exception):
                await sub.unsubscribe()

    async def _handle(self, msg: Msg, handler: Handler) -> None:
        try:
            try:
                item = decode(msg.data, WhatsAppItem)
            except msgspec.MsgspecError as exc:
                log.warning("dropped a malformed WhatsApp item on %s: %s", msg.subject, exc)
                await msg.ack_sync()
                return
            async with self._keyed.hold(msg.subject):
                if not await self._first(msg):
                    await msg.nak(delay=ORDER_WAIT_S)
                    return
                if await self._process(msg, item, handler):
                    await msg.ack_sync()
        except asyncio.CancelledError:  # the replica stops: another takes the item at once
            with contextlib.suppress(Exception):
                await msg.nak()
            raise
        except Exception as exc:  # NATS gone mid-way: the item comes again after ack_wait_s
            log.warning("a WhatsApp item on %s was not acknowledged: %r", msg.subject, exc)
        finally:
            self._room.release()

    async def _process(self, msg: Msg, item: WhatsAppItem, handler: Handler) -> bool:
        """Run ``handler`` on ``item``, saying it is in progress meanwhile; True to acknowledge
        it (processed, or let go), False when it was asked for again."""
        beat = asyncio.create_task(self._in_progress(msg))
        try:
            await handler(item, msg.metadata.num_delivered or 1)
        except Later as exc:
            log.info("a WhatsApp item of %s waits %ss: %s", item.contact, exc.delay_s, exc)
            await msg.nak(delay=exc.delay_s)
            return False
        except TRANSIENT as exc:
            log.warning("a WhatsApp item of %s is asked for again: %s", item.contact, exc)
            await msg.nak(delay=self.retry_s)
            return False
        except Exception:
            log.exception("a WhatsApp item of %s was not processed: let go", item.contact)
        finally:
            beat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beat
        return True

    async def _in_progress(self, msg: Msg) -> None:
        while True:
            await asyncio.sleep(self.ack_wait_s / 3)
            with contextlib.suppress(Exception):
                await msg.in_progress()

    async def _first(self, msg: Msg) -> bool:
        """Whether ``msg`` is the first item its thread's subject still holds."""
        try:
            first = await self.bus.js.get_msg(
                self.bus.subjects.whatsapp_stream, seq=1, subject=msg.subject, next=True
            )
        except nats.js.errors.NotFoundError:
            return True
        return bool(first.seq is None or first.seq >= msg.metadata.sequence.stream)

    async def aclose(self) -> None:
        """Stop taking items; those in hand are handed back (``nak``), for another replica to
        take at once, not after ``ack_wait_s`` (the thread's later items wait behind them)."""
        for task in [t for t in (self._loop, *self._tasks) if t is not None]:
            task.cancel()
        await asyncio.gather(
            *[t for t in (self._loop, *self._tasks) if t is not None], return_exceptions=True
        )
