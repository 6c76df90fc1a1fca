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


def _cancel_lost() -> bool:
    """The running task was asked to stop and the request did not reach it as ``CancelledError``."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


async def fetch_one(sub: JetStreamContext.PullSubscription, timeout_s: float) -> Msg | None:
    """The next message of ``sub``; None when none came within ``timeout_s``. nats-py's other
    errors (the connection closed, no servers, the consumer gone) are raised.

    A task cancelled in a fetch stops here, with ``CancelledError``, even when nats-py lost the
    cancellation: ``Subscription.next_msg`` (nats-py 2.x, ``nats/aio/subscription.py``) waits in
    Python 3.11's ``asyncio.wait_for``, which returns a message that came in the same turn of the
    loop as the cancellation instead of raising it (CPython gh-86296, fixed in 3.12), and it turns
    a cancellation into ``ConnectionClosedError`` when the connection closed meanwhile. A consumer
    that went on would hold its service's stop for ever (seen in ``tests/dispatcher``'s chain:
    the dispatcher's ``stop`` awaiting its consumer). The message in hand is then handed back
    (``nak``), for another replica to take at once rather than after the consumer's ack wait."""
    try:
        [msg] = await sub.fetch(1, timeout=timeout_s)
    except TimeoutError:  # nats-py's own TimeoutError and FetchTimeoutError are one
        msg = None
    except nats.errors.Error:
        if _cancel_lost():
            raise asyncio.CancelledError from None
        raise
    if _cancel_lost():
        if msg is not None:
            with contextlib.suppress(Exception):
                await msg.nak()
        raise asyncio.CancelledError
    return msg


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
    fetch at a time (:func:`fetch_one`)."""
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
            try:
                msg = await fetch_one(sub, 5)
            except (nats.errors.ConnectionClosedError, nats.errors.NoServersError) as exc:
                _log.warning("the %s consumer lost NATS: %s", durable, exc)
                await asyncio.sleep(redeliver_s)  # the connection reconnects by itself
                continue
            if msg is None:
                continue
            try:
                message = decode(msg.data, kind)
            except msgspec.MsgspecError as exc:
                _log.warning("dropped a malformed %s on %s: %s", kind.__name__, msg.subject, exc)
                await msg.term()
                continue
            await room.acquire()
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
