"""A durable consumer on a real JetStream stream stops when its task is cancelled and leaves no
message behind, whichever turn of nats-py's fetch the cancellation meets
(``pinecall_servicekit.stream.fetch_one``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from pinecall_contracts.fleet import HeartbeatReply
from pinecall_servicekit import stream as stream_module
from pinecall_servicekit.bus import Bus
from pinecall_servicekit.stream import consume


@pytest.fixture
async def bus(nats_url: str, nats_namespace: str) -> AsyncIterator[Bus]:
    bus = await Bus.connect(nats_url, nats_namespace, name="test")
    yield bus
    await bus.close()


class CancelsOnDelivery(asyncio.Queue[Any]):
    """A subscription's queue of messages that cancels ``task`` ``turns`` turns of the loop after
    the turn a message is put on it. At 0 the cancellation reaches nats-py's
    ``asyncio.wait_for`` after the queue's getter has its message and before ``wait_for``
    resumes, the race Python 3.11's ``wait_for`` answers with the message (CPython gh-86296; seen
    about one run in ten in a chain test's teardown). At 1–2 it reaches ``next_msg`` after its
    getter finished, which dropped the message with the cancelled task (it came again after the
    ack wait); later, the consumer has the message in hand."""

    def __init__(self, turns: int) -> None:
        super().__init__()
        self.turns = turns
        self.task: asyncio.Task[None] | None = None

    def put_nowait(self, item: Any) -> None:
        super().put_nowait(item)
        if self.task is not None:
            self._cancel_after(self.task, self.turns)
            self.task = None

    def _cancel_after(self, task: asyncio.Task[None], turns: int) -> None:
        loop = asyncio.get_running_loop()
        if turns == 0:
            loop.call_soon(task.cancel)
        else:
            loop.call_soon(self._cancel_after, task, turns - 1)


class Readers:
    """Consumers of one durable whose ack wait is an hour, noting which handled what."""

    def __init__(self, bus: Bus, stream: str, subject: str, durable: str) -> None:
        self.bus, self.stream, self.subject, self.durable = bus, stream, subject, durable
        self.handled: list[tuple[str, HeartbeatReply]] = []
        self.got = asyncio.Event()

    async def start(self, name: str) -> asyncio.Task[None]:
        """A consumer named ``name``, bound."""

        async def handler(message: HeartbeatReply) -> None:
            self.handled.append((name, message))
            self.got.set()

        ready = asyncio.Event()
        task = asyncio.create_task(
            consume(
                self.bus,
                stream=self.stream,
                subject=self.subject,
                durable=self.durable,
                kind=HeartbeatReply,
                handler=handler,
                ack_wait_s=3600,
                ready=ready,
            )
        )
        await ready.wait()
        return task

    async def taken_by_the_next(self, sent: HeartbeatReply) -> None:
        """The next consumer of the durable takes ``sent`` at once (not after the ack wait)."""
        second = await self.start("second")
        try:
            async with asyncio.timeout(10):
                await self.got.wait()
        finally:
            second.cancel()
            with pytest.raises(asyncio.CancelledError):
                await second
        assert self.handled == [("second", sent)]


@pytest.mark.parametrize("turns", range(6))
async def test_a_consumer_cancelled_as_a_message_comes_leaves_none_behind(
    bus: Bus, turns: int
) -> None:
    """Its task ends cancelled, and the message is handled once and at once: by the consumer
    itself when it had it in hand, else handed back and taken by the next consumer of the durable
    without waiting out the ack wait (an hour here)."""
    prefix = bus.subjects.namespace
    stream, subject = f"{prefix}-lost-cancel", f"{prefix}.lost.cancel"
    await bus.ensure_stream(stream, [subject], duplicate_window_s=60, max_age_s=600)
    queue = CancelsOnDelivery(turns)
    subscribe = bus.js.pull_subscribe

    async def hooked(*args: Any, **kwargs: Any) -> Any:
        sub = await subscribe(*args, **kwargs)
        sub._sub._pending_queue = queue  # the fault's only way in: nats-py's own queue
        return sub

    readers = Readers(bus, stream, subject, "lost-cancel")
    bus.js.pull_subscribe = hooked  # type: ignore[method-assign]
    first = await readers.start("first")
    bus.js.pull_subscribe = subscribe  # type: ignore[method-assign]
    queue.task = first
    sent = HeartbeatReply(cordoned=True, fleet_full=False)
    await bus.publish_stored(subject, sent)
    with pytest.raises(asyncio.CancelledError):
        async with asyncio.timeout(10):  # nats-py's fetch alone: handled, then fetching for ever
            await first
    assert queue.task is None  # the fault happened: the message came while the fetch waited
    if readers.got.is_set():  # it was in hand: handled and acknowledged before the consumer stopped
        assert readers.handled == [("first", sent)]
        return
    await readers.taken_by_the_next(sent)


async def test_a_consumer_cancelled_twice_while_it_fetches_leaves_none_behind(
    bus: Bus, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stop that is itself cancelled (an ``asyncio.timeout`` around it, a second Ctrl-C)
    cancels the consumer twice while its pull request is open: a message the server sent that
    request (stored just before) is handled by the consumer if it had it in hand, else handed
    back, and the next consumer of the durable takes it at once, not after the ack wait (an hour
    here)."""
    prefix = bus.subjects.namespace
    stream, subject = f"{prefix}-twice", f"{prefix}.twice"
    await bus.ensure_stream(stream, [subject], duplicate_window_s=60, max_age_s=600)
    subscribe = bus.js.pull_subscribe
    fetching = asyncio.Event()

    async def hooked(*args: Any, **kwargs: Any) -> Any:
        sub = await subscribe(*args, **kwargs)
        fetch = sub.fetch

        async def fetch_seen(*args: Any, **kwargs: Any) -> Any:
            fetching.set()
            return await fetch(*args, **kwargs)

        sub.fetch = fetch_seen
        return sub

    handing_back = asyncio.Event()
    hand_back = stream_module._hand_back

    async def hand_back_seen(*args: Any) -> None:
        handing_back.set()
        await hand_back(*args)

    monkeypatch.setattr(stream_module, "_hand_back", hand_back_seen)
    readers = Readers(bus, stream, subject, "twice")
    bus.js.pull_subscribe = hooked  # type: ignore[method-assign]
    first = await readers.start("first")
    await fetching.wait()  # its pull request is on its way, open for FETCH_S
    bus.js.pull_subscribe = subscribe  # type: ignore[method-assign]
    sent = HeartbeatReply(cordoned=False, fleet_full=True)
    await bus.publish_stored(subject, sent)  # stored: on its way to the open pull request
    first.cancel()
    await handing_back.wait()  # the first cancellation taken: the consumer waits for its fetch
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        async with asyncio.timeout(10):
            await first
    if readers.got.is_set():  # it was in hand before the first cancellation: handled by the first
        assert readers.handled == [("first", sent)]
        return
    await readers.taken_by_the_next(sent)


class Gate:
    """A loopback TCP proxy to NATS that can hold every byte either way (a connection that
    stalls: a full socket buffer, a peer's machine paused) and let them go later, in order."""

    def __init__(self, upstream: str) -> None:
        host, port = upstream.removeprefix("nats://").rsplit(":", 1)
        self.host, self.port = host, int(port)
        self.flowing = asyncio.Event()
        self.flowing.set()
        self.server: asyncio.Server | None = None
        self.pumps: set[asyncio.Task[None]] = set()

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._connected, "127.0.0.1", 0)
        return f"nats://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def _connected(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(self.host, self.port)
        for source, sink in ((reader, up_writer), (up_reader, writer)):
            pump = asyncio.create_task(self._pump(source, sink))
            self.pumps.add(pump)
            pump.add_done_callback(self.pumps.discard)

    async def _pump(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        try:
            while data := await source.read(65536):
                await self.flowing.wait()
                sink.write(data)
                await sink.drain()
        except ConnectionError:
            pass
        finally:
            sink.close()

    async def close(self) -> None:
        for pump in list(self.pumps):
            pump.cancel()
        await asyncio.gather(*self.pumps, return_exceptions=True)
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()


async def test_a_consumer_stopped_while_its_connection_stalls_leaves_the_connection_working(
    nats_url: str, nats_namespace: str
) -> None:
    """A stop while the connection to NATS stalls: the hand-back's flush gets no answer in its
    second and the consumer ends; when the connection flows again the Bus still answers (nats-py
    2.16 stopped reading for good when a PONG came after its flush had timed out)."""
    gate = Gate(nats_url)
    bus = await Bus.connect(await gate.start(), nats_namespace, name="test")
    try:
        prefix = bus.subjects.namespace
        stream, subject = f"{prefix}-stall", f"{prefix}.stall"
        await bus.ensure_stream(stream, [subject], duplicate_window_s=60, max_age_s=600)
        readers = Readers(bus, stream, subject, "stall")
        first = await readers.start("first")
        gate.flowing.clear()  # the connection stalls, both ways
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            async with asyncio.timeout(10):  # the fetch's 0.5 s, then the flush's 1 s at most
                await first
        gate.flowing.set()
        sent = HeartbeatReply(cordoned=True, fleet_full=True)
        async with asyncio.timeout(10):
            await bus.publish_stored(subject, sent)  # stored: the connection answers again
        await readers.taken_by_the_next(sent)
    finally:
        await bus.close()
        await gate.close()
