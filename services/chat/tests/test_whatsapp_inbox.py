"""A chat replica that stops with WhatsApp items in hand hands them back: the next replica takes
them at once, not after the ack wait, and the thread's later items follow in order
(``pinecall_chat.whatsapp_inbox.Inbox.aclose``), on real JetStream."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from pinecall_chat.whatsapp_inbox import Inbox
from pinecall_contracts.whatsapp import WhatsAppItem
from pinecall_servicekit.bus import Bus

NUMBER, CONTACT = "106540352242922", "15551234567"


@pytest.fixture
async def bus(nats_url: str, nats_namespace: str) -> AsyncIterator[Bus]:
    bus = await Bus.connect(nats_url, nats_namespace, name="test")
    yield bus
    await bus.close()


def item(n: int) -> WhatsAppItem:
    return WhatsAppItem(number=NUMBER, contact=CONTACT, message={"id": f"wamid.{n}", "n": n})


async def test_a_stopping_replica_hands_back_the_items_it_holds(bus: Bus) -> None:
    first = Inbox(bus, ack_wait_s=3600)  # an item left in hand would come again in an hour
    await first.ensure()
    taken = asyncio.Event()

    async def holds(got: WhatsAppItem, delivered: int) -> None:
        taken.set()
        await asyncio.Event().wait()  # a reply under way as the replica stops

    await first.start(holds)
    for n in range(3):
        assert await first.put(item(n), f"wamid.{n}")
    async with asyncio.timeout(10):
        await taken.wait()
    await first.aclose()

    second = Inbox(bus, ack_wait_s=3600)
    handled: list[tuple[int, int]] = []
    all_three = asyncio.Event()

    async def handles(got: WhatsAppItem, delivered: int) -> None:
        assert got.message is not None
        handled.append((got.message["n"], delivered))
        if len(handled) == 3:
            all_three.set()

    await second.start(handles)
    try:
        async with asyncio.timeout(10):
            await all_three.wait()
    finally:
        await second.aclose()
    # in the thread's order, the first one delivered again (the rest may have been too: each
    # waits behind the first, asked for again shortly)
    assert [n for n, _ in handled] == [0, 1, 2]
    assert handled[0][1] == 2
