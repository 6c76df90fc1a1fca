"""Callers whose worker is lost, and what each call's log and room say after (the death and the
frozen-worker experiments share them).

- :class:`Ears` listens to a caller once its call is answered: when it first hears audio from an
  agent other than the one it had (the sentence's job), and who that agent is;
- :func:`logged` waits until a call's log holds an entry of a kind (its worker wrote a turn);
- :func:`lost_call` reads, after the fact, what became of one call: the loss's webhook, the
  sentence heard, the log's end, its call back, its seal, its room.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
from livekit import api
from livekit.protocol import models

from pinecall_contracts.base import decode
from pinecall_contracts.calls import Appended, CallEvent, CallLog
from pinecall_labroom import LabRoom
from pinecall_loadlab.livekit import events as ev
from pinecall_loadlab.scenarios.chain import AGENT_NAME, Chain
from pinecall_servicekit.bus import Bus
from pinecall_servicekit.testing.apps import Replica

AGENT = models.ParticipantInfo.Kind.AGENT


class LostCall(msgspec.Struct, kw_only=True):
    """One call of a worker that was lost, as the caller, LiveKit and the log saw it."""

    room: str
    call: str
    answered_by: str | None
    """The agent that answered before the loss."""
    lost_to_webhook_s: float | None
    """From the kill (or the freeze) to LiveKit's ``participant_left`` of the agent."""
    webhook_to_sentence_s: float | None
    """From that webhook to the first audio of another agent the caller heard (None: silent)."""
    sentence_by: str | None
    """The agent (worker name) the caller heard after the loss."""
    ended: str | None
    """The call's outcome on the log (None: still open)."""
    callback: bool
    """A ``callback.requested`` for this call on the agent's log."""
    sealed: bool
    room_deleted: bool
    written: int
    """The count the lost worker's writer reached (the log's, read before the loss)."""
    sentence_after: int | None
    """The count ``call.sentence`` took (None: no sentence on the log)."""
    gap: bool
    """The log's seqs or the writers' counts skip or repeat."""
    after_loss: list[str]
    """The kinds of the log's entries after the lost worker's last, in seq order."""


class Ears:
    """A caller's ears from now on: the first audio heard from an agent other than ``had``."""

    def __init__(self, caller: LabRoom, had: str) -> None:
        self.caller, self.had = caller, had
        self.heard_at: float | None = None
        self.heard_from: str | None = None
        self.heard = asyncio.Event()
        self._task = asyncio.create_task(self._listen())

    async def _listen(self) -> None:
        while True:
            chunk = await self.caller.audio.get()
            if chunk.sender != self.had and any(chunk.pcm) and self.heard_at is None:
                self.heard_at = time.time()
                who = self.caller.participants.get(chunk.sender, {})
                self.heard_from = who.get("attributes", {}).get(AGENT_NAME, chunk.sender)
                self.heard.set()

    async def aclose(self) -> None:
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


async def agent_of(chain: Chain, room: str) -> tuple[str, str]:
    """The identity and worker name of the agent in ``room`` now."""
    people = await chain.livekit.room.list_participants(api.ListParticipantsRequest(room=room))
    [agent] = [p for p in people.participants if p.kind == AGENT]
    return agent.identity, agent.attributes.get(AGENT_NAME, "")


def call_log_of(chain: Chain) -> Replica:
    """The chain's call-log (these scenarios need one)."""
    if chain.call_log is None:
        raise ValueError("the chain has no call-log")
    return chain.call_log


async def read_log(chain: Chain, call: str) -> CallLog:
    """The call's whole log, read with the operator's key."""
    r = await call_log_of(chain).get(
        f"/v1/calls/{call}/entries",
        headers={"authorization": f"Bearer {chain.config.operator_key}"},
    )
    r.raise_for_status()
    return decode(r.content, CallLog)


async def until_log(
    chain: Chain,
    bus: Bus,
    call: str,
    done: Callable[[CallLog], bool],
    subject: str,
    kind: type[Appended] | type[CallEvent],
) -> CallLog:
    """The call's log once ``done`` says so, read again at each ``kind`` said on ``subject``
    (an entry written, the call sealed); bound it with ``asyncio.timeout``."""
    arrived = asyncio.Event()

    async def wake(_: object) -> None:
        arrived.set()

    sub = await bus.subscribe(subject, kind, wake)  # before the first read: nothing is missed
    try:
        while not done(log := await read_log(chain, call)):
            await arrived.wait()
            arrived.clear()
        return log
    finally:
        await sub.unsubscribe()


async def logged(chain: Chain, bus: Bus, call: str, kind: str) -> CallLog:
    """The call's log once it holds an entry of ``kind`` (its worker wrote a turn)."""
    return await until_log(
        chain,
        bus,
        call,
        lambda log: any(e.kind == kind for e in log.entries),
        bus.subjects.appended(call),
        Appended,
    )


async def _within(seconds: float, wait: Awaitable[Any]) -> bool:
    """Whether ``wait`` finished within ``seconds`` (it is cancelled if not)."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await wait
            return True
    return False


async def lost_call(
    chain: Chain,
    bus: Bus,
    *,
    room: str,
    call: str,
    identity: str,
    answered_by: str,
    written: int,
    ears: Ears,
    lost_at: float,
    settle_s: float,
    quiet_s: float,
) -> LostCall:
    """What became of one call whose agent (``identity``) was lost at ``lost_at``: waits up to
    ``settle_s`` for LiveKit's webhook and the room's end, and up to ``quiet_s`` after the
    webhook for the caller to hear anything."""

    def gone(e: ev.ParticipantLeft) -> bool:
        return e.room == room and e.identity == identity

    webhook: float | None = None
    if await _within(settle_s, chain.lk.events.wait_for(ev.ParticipantLeft, gone)):
        [left] = chain.lk.events.of(ev.ParticipantLeft, gone)
        webhook = left.at
        await _within(quiet_s, ears.heard.wait())
    deleted = (
        webhook is not None
        and ears.heard_at is not None
        and await _within(
            settle_s, chain.lk.events.wait_for(ev.RoomFinished, lambda e: e.room == room)
        )
    )
    if deleted:  # the sentence job seals after the room goes
        sealed = until_log(
            chain,
            bus,
            call,
            lambda log: log.state == "sealed",
            bus.subjects.call_event("sealed", call),
            CallEvent,
        )
        await _within(settle_s, sealed)
    log = await read_log(chain, call)
    ended = [e.data.get("outcome") for e in log.entries if e.kind == "call.ended"]
    said = [e.counted for e in log.entries if e.kind == "call.sentence"]
    counted = [e.counted for e in log.entries if e.counted is not None]
    last_seq = max((e.seq for e in log.entries if e.counted == written - 1), default=1)
    return LostCall(
        room=room,
        call=call,
        answered_by=answered_by,
        lost_to_webhook_s=None if webhook is None else round(webhook - lost_at, 2),
        webhook_to_sentence_s=(
            None if webhook is None or ears.heard_at is None else round(ears.heard_at - webhook, 2)
        ),
        sentence_by=ears.heard_from,
        ended=ended[0] if ended else None,
        callback=await _called_back(chain, call),
        sealed=log.state == "sealed",
        room_deleted=bool(chain.lk.events.of(ev.RoomFinished, lambda e: e.room == room)),
        written=written,
        sentence_after=said[0] if said else None,
        gap=[e.seq for e in log.entries] != list(range(1, len(log.entries) + 1))
        or counted != list(range(len(counted))),
        after_loss=[e.kind for e in log.entries if e.seq > last_seq],
    )


async def _called_back(chain: Chain, call: str) -> bool:
    r = await call_log_of(chain).get(
        "/v1/agents/lab-agent/log",
        params={"environment": "production"},  # the chain's fleet's
        headers={"authorization": f"Bearer {chain.config.operator_key}"},
    )
    r.raise_for_status()
    return any(
        e["kind"] == "callback.requested" and e["data"].get("call") == call
        for e in r.json()["entries"]
    )
