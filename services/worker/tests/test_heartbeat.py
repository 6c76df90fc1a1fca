"""The worker's heartbeat through the roster's client, to a real roster: counted and answered with
the fleet key; refused, or unanswered, it is logged and the next beat says everything again."""

from __future__ import annotations

import asyncio
import logging

import httpx
import pytest

from pinecall_clients.roster import RosterClient
from pinecall_contracts.fleet import HeartbeatReply, WorkerHeartbeat
from pinecall_testkit.roster import Keys, Replica
from pinecall_worker.heartbeat import Heartbeat

NAME = "pinecall/worker-h.1791067258"
STATE = WorkerHeartbeat(
    fleet="pinecall", worker=NAME, agent_name=NAME, active=3, max_jobs=4, load=0.75
)


async def test_a_heartbeat_through_the_roster_client_is_counted_and_answered(
    roster: Replica, keys: Keys
) -> None:
    replies: list[HeartbeatReply] = []

    async def on_reply(reply: HeartbeatReply) -> None:
        replies.append(reply)

    client = RosterClient(
        keys.production, base_url="http://roster.test", transport=roster.transport
    )
    async with client:
        heartbeat = Heartbeat(client, lambda: STATE, on_reply)
        reply = await heartbeat.beat()
    assert reply == HeartbeatReply(cordoned=False, fleet_full=False)
    assert replies == [reply]
    assert (heartbeat.sent, heartbeat.answered) == (1, 1)
    [row] = roster.app.state.roster.view("pinecall").workers
    assert (row.worker, row.active, row.seats) == (NAME, 3, 4)


async def test_a_heartbeat_refused_or_unanswered_is_logged_and_nothing_is_answered(
    roster: Replica, keys: Keys, caplog: pytest.LogCaptureFixture
) -> None:
    async def on_reply(reply: HeartbeatReply) -> None:
        raise AssertionError("no answer to hand on")

    sandbox = RosterClient(keys.sandbox, base_url="http://roster.test", transport=roster.transport)

    def gone(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("the roster is gone", request=request)

    nobody = RosterClient(
        keys.production, base_url="http://roster.test", transport=httpx.MockTransport(gone)
    )
    with caplog.at_level(logging.WARNING, logger="pinecall_worker.heartbeat"):
        async with sandbox, nobody:
            refused = Heartbeat(sandbox, lambda: STATE, on_reply)
            assert await refused.beat() is None
            unanswered = Heartbeat(nobody, lambda: STATE, on_reply)
            assert await unanswered.beat() is None
    assert (refused.sent, refused.answered, unanswered.sent, unanswered.answered) == (1, 0, 1, 0)
    said = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert said[0][0] == "ERROR"
    assert said[0][1].startswith("heartbeat refused: 403")
    assert said[1][0] == "WARNING"
    assert said[1][1].startswith("heartbeat: the roster did not answer")
    assert roster.app.state.roster.view("pinecall").workers == []


async def test_the_beats_stop_when_cancelled_in_the_turn_a_wake_comes(
    roster: Replica, keys: Keys
) -> None:
    """A worker stopping (its beats cancelled) as a change wakes them: the beats end, none after
    (Python 3.11's ``wait_for`` dropped that cancellation and beat on; CPython gh-86296)."""
    answered = asyncio.Event()

    async def on_reply(reply: HeartbeatReply) -> None:
        answered.set()

    client = RosterClient(
        keys.production, base_url="http://roster.test", transport=roster.transport
    )
    async with client:
        heartbeat = Heartbeat(client, lambda: STATE, on_reply, every_s=3600)
        beats = asyncio.create_task(heartbeat.run())
        await answered.wait()  # the first beat, at once; in the same step, waiting for a wake
        heartbeat.wake()
        beats.cancel()
        with pytest.raises(asyncio.CancelledError):
            async with asyncio.timeout(10):  # with wait_for: a second beat, then an hour's wait
                await beats
    assert heartbeat.sent == 1
