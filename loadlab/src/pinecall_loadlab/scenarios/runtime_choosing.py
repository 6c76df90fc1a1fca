"""Calls placed while the runtime chooses the worker (the chain of :mod:`.chain`).

Each call is a SIP call as LiveKit SIP brings it (``callers.sip_call``: a room with a ring to the
fleet's plain name, the caller joining as a SIP participant); the dispatcher places it. A call is
*answered* when an agent joins its room; who answered is the agent's ``lk.agent_name`` (a worker,
or ``<fleet>/overflow``); a call no agent joins within ``settle_s`` is *silent*.

``settle_each`` waits for each call's agent before the next call (the seeds' capacity runs, one
after another); either way ``interval_s`` passes before the next call, and every call is awaited
at the end (the ghost run, a burst: calls placed ``interval_s`` apart regardless).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from livekit.protocol import models

from pinecall_labroom import LabRoom
from pinecall_loadlab.livekit import events as ev
from pinecall_loadlab.livekit.callers import LAB_RING, sip_call
from pinecall_loadlab.scenarios.chain import Chain

AGENT = models.ParticipantInfo.Kind.AGENT
RING = LAB_RING
"""What the lab's SIP dispatch rule puts on its ring: the lab's agent (defined by the chain)."""


@dataclass
class Answered:
    """One placed call and who answered it (None: silent)."""

    room: str
    by: str | None


async def _answered(chain: Chain, room: str) -> None:
    await chain.lk.events.wait_for(
        ev.ParticipantJoined, lambda e: e.room == room and e.kind == AGENT
    )


async def place_calls(
    chain: Chain,
    *,
    prefix: str,
    calls: int,
    fleet: str = "pinecall",
    interval_s: float = 0.0,
    settle_each: bool = False,
    settle_s: float = 60.0,
    before_call: Callable[[int], Awaitable[None]] | None = None,
) -> tuple[list[Answered], list[LabRoom]]:
    """Place ``calls`` SIP calls for ``fleet``; who answered each, and the callers (still in
    their rooms: the caller hangs up with ``leave()``)."""
    rooms = [f"{prefix}-{i + 1}" for i in range(calls)]
    callers: list[LabRoom] = []
    for i, room in enumerate(rooms):
        if before_call is not None:
            await before_call(i)
        callers.append(
            await sip_call(
                chain.livekit,
                chain.lk.url,
                chain.config.api_key,
                chain.config.api_secret,
                room=room,
                fleet=fleet,
                phone=f"+1555{i:06d}",
                metadata=RING,
            )
        )
        if settle_each:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(settle_s):
                    await _answered(chain, room)
        if interval_s > 0:
            await asyncio.sleep(interval_s)  # the experiment's pacing, not a wait for an event
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(settle_s):
            for room in rooms:
                await _answered(chain, room)
    return [Answered(room=r, by=await chain.answered_by(r)) for r in rooms], callers
