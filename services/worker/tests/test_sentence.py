"""The ``sentence`` job (seed 000, "A worker that dies"): offered into the room of a worker that
died, it says the overflow's sentence to the caller, writes it after the dead worker's count,
deletes the room and seals the call. The entrypoint routes on ``JobOffer.job``."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from livekit import api

from pinecall_clients.calllog import CallLogClient
from pinecall_contracts.calls import CallOpen
from pinecall_labroom import LabRoom
from pinecall_loadlab.vendors import VendorFakes
from pinecall_testkit.call_log import Process
from pinecall_testkit.roster import Keys
from pinecall_testkit.worker import CallEvents, kinds, of_kind, offer_call, read_log, serving
from pinecall_worker.server import Worker

DEAD = "pinecall/worker-dead.1791067258"


async def heard_until_hung_up(caller: LabRoom) -> int:
    """The frames of sound a silent caller hears until the room is deleted under it."""
    heard = 0
    closed = asyncio.ensure_future(caller.closed.wait())
    while True:
        chunk = asyncio.ensure_future(caller.audio.get())
        done, _ = await asyncio.wait({chunk, closed}, return_when=asyncio.FIRST_COMPLETED)
        if chunk not in done:
            chunk.cancel()
            return heard
        heard += any(chunk.result().pcm)


async def test_a_sentence_job_says_the_sentence_follows_on_deletes_the_room_and_seals(
    call_worker: Callable[..., Worker],
    caller: Callable[[str], Awaitable[LabRoom]],
    livekit_api: api.LiveKitAPI,
    vendor_fakes: VendorFakes,
    keys: Keys,
    call_log: Process,
    call_events: CallEvents,
) -> None:
    # the dead worker's call, as the runtime leaves it: three entries written, ended drained
    async with CallLogClient(call_log.url, keys.production) as client:
        await client.open(
            CallOpen(
                call="call_dead",
                agent="support-bot",
                org="org_acme",
                environment="production",
                room="call-dead",
                worker=DEAD,
            )
        )
        writer = client.writer("call_dead")
        for n in range(3):
            writer.add("turn.user", {"text": f"line {n}"})
        await writer.drain()
        await client.end("call_dead", "drained", "the agent's connection was lost")
    worker = call_worker()
    settings = worker.settings
    async with serving(worker):
        room = await caller("call-dead")
        async with asyncio.timeout(120):
            await offer_call(
                livekit_api,
                worker.name,
                room="call-dead",
                call="call_dead",
                job="sentence",
                written=writer.written,
            )
            heard = await heard_until_hung_up(room)
            sealed = await call_events.wait("sealed", "call_dead")
    assert heard > 0  # the caller heard the sentence, then the room went
    assert room.removed_reason == "ROOM_DELETED"
    said = " ".join(t.strip() for t in vendor_fakes.cartesia.transcripts if t.strip())
    assert said == settings.overflow_says  # the voice said it (in the sentences it was cut into)
    assert sealed.outcome == "drained"
    log = await read_log(call_log.url, keys.production, "call_dead")
    assert kinds(log) == [
        "call.started",
        "turn.user",
        "turn.user",
        "turn.user",
        "call.ended",
        "call.sentence",
        "call.sealed",
    ]
    assert of_kind(log, "call.sentence") == [{"text": settings.overflow_says, "job": "sentence"}]
    assert [e.counted for e in log.entries if e.counted is not None] == [0, 1, 2, 3]
