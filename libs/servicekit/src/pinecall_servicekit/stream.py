"""Reading a JetStream stream with a durable consumer: every replica pulls from the same consumer,
so one replica handles each message, and a replica that restarts goes on from the last message
acknowledged (``shared/DESIGN.md``, "The wire").

:func:`consume` hands each message, decoded as its Contract, to a handler; it acknowledges the
message when the handler returns and asks for it again ``redeliver_s`` later when the handler
raises (up to ``max_deliver`` deliveries). Messages run concurrently (``concurrency`` at most),
except that messages with the same ``key`` run one after another in the stream's order. A
message that does not decode is logged and terminated: a newer publisher's breaking change must
not stop the reader.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

import msgspec
import nats.aio.client
import nats.errors
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from opentelemetry import propagate, trace

from pinecall_contracts.base import Contract, decode
from pinecall_servicekit.bus import Bus

C = TypeVar("C", bound=Contract)
_log = logging.getLogger(__name__)
STOP_S = 10.0
"""How long a stopping consumer waits for the messages it holds."""
_tracer = trace.get_tracer(__name__)


class Keyed:
    """One lock per key, dropped when nobody holds or waits for it."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    @contextlib.asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        lock, users = self._locks.get(key, (asyncio.Lock(), 0))
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[key]
            if users <= 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)


FETCH_S = 0.5
"""How long one fetch waits for a message; a consumer stopping while it waits waits that long at
most for the fetch to end."""


FLUSH_WAIT_S = 1.0
"""How long a stopping fetch that brought nothing waits for its connection's round trip (the
flush that brings what the server sent before it) before it hands back what it holds."""
PONG_WAIT_S = 3600
"""How long that flush goes on waiting for its PONG in the background: past nats-py's own stale
connection (2 pings outstanding, 120 s apart), whose reconnection drops the PONG's future."""


async def _fetch(sub: JetStreamContext.PullSubscription, timeout_s: float) -> Msg | None:
    try:
        [msg] = await sub.fetch(1, timeout=timeout_s)
    except TimeoutError:  # nats-py's own TimeoutError and FetchTimeoutError are one
        return None
    return msg


def _queued(sub: JetStreamContext.PullSubscription) -> list[Msg]:
    """The messages ``sub`` received and no fetch took, its pull requests' ends (``408``
    statuses) left out: taken off nats-py's own queue (``Subscription._pending_queue``, nats-py
    2.x), since a fetch would first ask the server for more (a new pull request, and another
    ``timeout_s`` to wait)."""
    queue = getattr(getattr(sub, "_sub", None), "_pending_queue", None)
    taken: list[Msg] = []
    while queue is not None and not queue.empty():
        msg = queue.get_nowait()
        if not JetStreamContext.is_status_msg(msg):
            taken.append(msg)
    return taken


async def _hand_back(
    fetching: asyncio.Future[Msg | None],
    sub: JetStreamContext.PullSubscription,
    client: nats.aio.client.Client | None,
) -> None:
    """Wait for a cancelled caller's fetch to end and ``nak`` what it brought, or, when it
    brought nothing, what a flush of ``client`` brings (:func:`fetch_one`)."""
    await asyncio.wait({fetching})
    msg = None
    if not fetching.cancelled() and fetching.exception() is None:
        msg = fetching.result()
    with contextlib.suppress(Exception):
        late = []
        if msg is None and client is not None:
            # never a flush that times out: nats-py 2.16's cancels its PONG's future, and a PONG
            # that comes after it kills the connection's read loop (``_process_pong`` sets the
            # result of a cancelled future): the connection then says it is connected and
            # answers nothing. So the flush waits on in the background, past the time nats-py
            # itself calls the connection stale (its futures dropped with it).
            flushing = asyncio.ensure_future(client.flush(timeout=PONG_WAIT_S))
            flushing.add_done_callback(lambda t: t.cancelled() or t.exception())
            await asyncio.wait({flushing}, timeout=FLUSH_WAIT_S)
            if flushing.done() and not flushing.cancelled() and flushing.exception() is None:
                late = _queued(sub)
        for held in [msg, *late]:
            if held is not None:
                await held.nak()


async def fetch_one(
    sub: JetStreamContext.PullSubscription,
    timeout_s: float = FETCH_S,
    *,
    client: nats.aio.client.Client | None = None,
) -> Msg | None:
    """The next message of ``sub``; None when none came within ``timeout_s``. nats-py's other
    errors (the connection closed, no servers, the consumer gone) are raised.

    A task cancelled here raises ``CancelledError`` and leaves no message behind. nats-py's fetch
    cannot be cancelled without that risk: a message its ``Subscription.next_msg`` (nats-py 2.x,
    ``nats/aio/subscription.py``) took off the queue in the turn of the loop the cancellation came
    is dropped with the cancelled task, and JetStream hands it to another replica only after the
    consumer's ack wait (30 s: a ring placed 30 s late at a deploy); in the same turn, Python
    3.11's ``asyncio.wait_for`` returns it instead and loses the cancellation (CPython gh-86296),
    and a consumer that went on held its service's stop for ever. So the fetch runs in a task of
    its own that the cancellation does not reach: the cancelled caller waits for it to end (at
    most ``timeout_s``) and hands back what it brought (``nak``), for another replica to take at
    once. A second cancellation while it waits waits too: a fetch cancelled then would drop what
    the server sends its pull request until it expires (a stop whose caller is cancelled, an
    ``asyncio.timeout`` around a stop, a second Ctrl-C), and it ends by itself.

    nats-py's clock starts before the server's (the pull request's expiry is its timeout less
    0.1 ms): a message the server sends in the request's last moments may come after the fetch
    gave up. With ``client`` (``sub``'s connection), a stopping fetch that brought nothing flushes
    it, whose round trip brings whatever the server sent before, and hands back what is queued
    (:func:`_queued`), asking the server for nothing more; a connection that does not answer
    within :data:`FLUSH_WAIT_S` is left to answer later (:func:`_hand_back`)."""
    fetching = asyncio.ensure_future(_fetch(sub, timeout_s))
    try:
        await asyncio.wait({fetching})
    except asyncio.CancelledError:
        handing = asyncio.ensure_future(_hand_back(fetching, sub, client))
        while not handing.done():  # ends by itself, within timeout_s and a flush
            with contextlib.suppress(asyncio.CancelledError):  # raised below, once
                await asyncio.wait({handing})
        raise
    return fetching.result()


async def consume(
    bus: Bus,
    *,
    stream: str,
    subject: str,
    durable: str,
    kind: type[C],
    handler: Callable[[C], Awaitable[None]],
    key: Callable[[C], str] | None = None,
    concurrency: int = 32,
    ack_wait_s: float = 30.0,
    max_deliver: int = 20,
    redeliver_s: float = 1.0,
    ready: asyncio.Event | None = None,
) -> None:
    """Run until cancelled; ``ready`` is set once the consumer is bound. Messages are taken one
    fetch at a time (:func:`fetch_one`), each once there is room for it: a stop cancels no
    message in hand, and waits at most :data:`FETCH_S` for the fetch under way."""
    config = ConsumerConfig(
        durable_name=durable,
        ack_policy=AckPolicy.EXPLICIT,
        deliver_policy=DeliverPolicy.ALL,
        ack_wait=ack_wait_s,
        max_deliver=max_deliver,
        max_ack_pending=concurrency * 4,
    )
    sub = await bus.js.pull_subscribe(subject, durable=durable, stream=stream, config=config)
    if ready is not None:
        ready.set()
    room = asyncio.Semaphore(concurrency)
    keyed = Keyed()
    running: set[asyncio.Task[None]] = set()

    async def handle(msg: Msg, message: C) -> None:
        try:
            ctx = propagate.extract(msg.headers or {})
            with _tracer.start_as_current_span(f"consume {kind.__name__}", context=ctx):
                if key is None:
                    await handler(message)
                else:
                    async with keyed.hold(key(message)):
                        await handler(message)
            await msg.ack()
        except Exception:
            _log.exception(
                "%s on %s failed: asked again in %ss", kind.__name__, msg.subject, redeliver_s
            )
            with contextlib.suppress(Exception):
                await msg.nak(delay=redeliver_s)
        finally:
            room.release()

    try:
        while True:
            await room.acquire()  # before the fetch: a message is never held waiting for room
            try:
                msg = await fetch_one(sub, client=bus.client)
            except (nats.errors.ConnectionClosedError, nats.errors.NoServersError) as exc:
                room.release()
                _log.warning("the %s consumer lost NATS: %s", durable, exc)
                await asyncio.sleep(redeliver_s)  # the connection reconnects by itself
                continue
            except BaseException:
                room.release()
                raise
            if msg is None:
                room.release()
                continue
            try:
                message = decode(msg.data, kind)
            except msgspec.MsgspecError as exc:
                room.release()
                _log.warning("dropped a malformed %s on %s: %s", kind.__name__, msg.subject, exc)
                await msg.term()
                continue
            task = asyncio.create_task(handle(msg, message))
            running.add(task)
            task.add_done_callback(running.discard)
    finally:
        # what is in hand is finished (and acknowledged) before the replica goes; a handler that
        # does not finish in time is asked again of another replica after ack_wait_s
        if running:
            await asyncio.wait(running, timeout=STOP_S)
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)
        with contextlib.suppress(Exception):
            await sub.unsubscribe()
