"""A durable consumer on a real JetStream stream stops when its task is cancelled, even when
nats-py's fetch loses the cancellation (``pinecall_servicekit.stream.fetch_one``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from pinecall_contracts.fleet import HeartbeatReply
from pinecall_servicekit.bus import Bus
from pinecall_servicekit.stream import consume


@pytest.fixture
async def bus(nats_url: str, nats_namespace: str) -> AsyncIterator[Bus]:
    bus = await Bus.connect(nats_url, nats_namespace, name="test")
    yield bus
    await bus.close()


class CancelsOnDelivery(asyncio.Queue[Any]):
    """A subscription's queue of messages that cancels ``task`` in the turn of the loop a message
    is put on it: the cancellation reaches nats-py's ``asyncio.wait_for`` after the queue's getter
    has its message and before ``wait_for`` resumes, the race Python 3.11's ``wait_for`` answers
    with the message (CPython gh-86296). Seen about one run in ten in a chain test's teardown;
    here on every run."""

    task: asyncio.Task[None] | None = None

    def put_nowait(self, item: Any) -> None:
        super().put_nowait(item)
        if self.task is not None:
            asyncio.get_running_loop().call_soon(self.task.cancel)
            self.task = None


async def test_a_consumer_stops_when_its_fetch_loses_the_cancellation(bus: Bus) -> None:
    """Its task ends cancelled, the message in hand unhandled and handed back: the next consumer
    of the durable takes it at once, not after the ack wait (an hour here)."""
    prefix = bus.subjects.namespace
    stream, subject = f"{prefix}-lost-cancel", f"{prefix}.lost.cancel"
    await bus.ensure_stream(stream, [subject], duplicate_window_s=60, max_age_s=600)
    queue = CancelsOnDelivery()
    subscribe = bus.js.pull_subscribe

    async def hooked(*args: Any, **kwargs: Any) -> Any:
        sub = await subscribe(*args, **kwargs)
        sub._sub._pending_queue = queue  # the fault's only way in: nats-py's own queue
        return sub

    handled: list[tuple[str, HeartbeatReply]] = []
    got = asyncio.Event()

    async def reader(name: str) -> asyncio.Task[None]:
        """A consumer of the durable, bound."""

        async def handler(message: HeartbeatReply) -> None:
            handled.append((name, message))
            got.set()

        ready = asyncio.Event()
        task = asyncio.create_task(
            consume(
                bus,
                stream=stream,
                subject=subject,
                durable="lost-cancel",
                kind=HeartbeatReply,
                handler=handler,
                ack_wait_s=3600,
                ready=ready,
            )
        )
        await ready.wait()
        return task

    bus.js.pull_subscribe = hooked  # type: ignore[method-assign]
    first = await reader("first")
    bus.js.pull_subscribe = subscribe  # type: ignore[method-assign]
    queue.task = first
    sent = HeartbeatReply(cordoned=True, fleet_full=False)
    await bus.publish_stored(subject, sent)
    with pytest.raises(asyncio.CancelledError):
        async with asyncio.timeout(10):  # without fetch_one: handled, then fetching for ever
            await first
    assert queue.task is None  # the fault happened: the message came while the fetch waited
    assert handled == []

    second = await reader("second")
    try:
        async with asyncio.timeout(10):
            await got.wait()
    finally:
        second.cancel()
        with pytest.raises(asyncio.CancelledError):
            await second
    assert handled == [("second", sent)]
