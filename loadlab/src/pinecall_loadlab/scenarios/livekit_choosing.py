"""Calls placed while LiveKit chooses the worker: the seeds' capacity and ghost experiments.

Each call is a room created with one dispatch to the fleet's agent name (`CreateRoom.agents`), as
LiveKit SIP or a token's room config would make it; LiveKit's dispatcher (here the stand-in's)
offers it to one worker at a time. A call is *answered* when an agent participant joins its room.

`place_calls` waits for each call to settle (answered, or its JobRequest ended without a worker,
or offered to a known ghost) before the next, then waits `interval_s`; with ``interval_s=1`` it is
the seed's "a second apart", with 0 it is the same sequence without idle time (tests).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

from livekit import api
from livekit.protocol import models

from pinecall_loadlab.livekit import StandIn
from pinecall_loadlab.livekit import events as ev

AGENT = models.ParticipantInfo.Kind.AGENT


@dataclass
class Call:
    """One placed call and what became of it."""

    room: str
    offered_to: list[str] = field(default_factory=list)
    """Worker ids, in offer order."""
    outcome: str = ""
    """The JobRequest's end (`events.JobRequestEnded.outcome`)."""
    answered: bool = False
    """An agent participant is in the room (read back through RoomService)."""


async def place_calls(
    lk: StandIn,
    lkapi: api.LiveKitAPI,
    *,
    agent_name: str,
    calls: int,
    interval_s: float = 1.0,
    ghosts: set[str] | None = None,
    before_call: Callable[[int], Awaitable[None]] | None = None,
) -> list[Call]:
    """Place `calls` calls for `agent_name`, one after another; return each call's fate once every
    JobRequest has ended. `before_call(i)` runs before call i (0-based), e.g. to freeze a worker;
    `ghosts` are worker ids known to be frozen (their offers are not waited for in turn)."""
    ghosts = ghosts if ghosts is not None else set()
    rooms = [f"{agent_name}-call-{i + 1}" for i in range(calls)]
    for i, room in enumerate(rooms):
        if before_call is not None:
            await before_call(i)
        await lkapi.room.create_room(
            api.CreateRoomRequest(name=room, agents=[api.RoomAgentDispatch(agent_name=agent_name)])
        )
        await _settled(lk, room, ghosts)
        if interval_s > 0:
            await asyncio.sleep(interval_s)  # the experiment's pacing, not a wait for an event
    await asyncio.gather(*(lk.events.wait_for(ev.JobRequestEnded, _in(r)) for r in rooms))
    result = []
    for room in rooms:
        [ended] = lk.events.of(ev.JobRequestEnded, _in(room))
        offered = [e.worker_id for e in lk.events.of(ev.JobOffered, _in(room))]
        people = await lkapi.room.list_participants(api.ListParticipantsRequest(room=room))
        answered = any(p.kind == AGENT for p in people.participants)
        result.append(Call(room=room, offered_to=offered, outcome=ended.outcome, answered=answered))
    return result


class _InRoom(Protocol):
    @property
    def room(self) -> str: ...


def _in(room: str) -> Callable[[_InRoom], bool]:
    return lambda e: e.room == room


async def _settled(lk: StandIn, room: str, ghosts: set[str]) -> None:
    def answered(e: ev.ParticipantJoined) -> bool:
        return e.room == room and e.kind == AGENT

    def unassigned(e: ev.JobRequestEnded) -> bool:
        return e.room == room and e.outcome != "assigned"

    def to_ghost(e: ev.JobOffered) -> bool:
        return e.room == room and e.worker_id in ghosts

    await ev.first_of(
        lk.events.wait_for(ev.ParticipantJoined, answered),
        lk.events.wait_for(ev.JobRequestEnded, unassigned),
        lk.events.wait_for(ev.JobOffered, to_ghost),
    )
