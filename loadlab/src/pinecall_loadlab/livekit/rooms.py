"""Rooms, their participants and dispatches, and the webhooks their lives produce.

Follows `LK:pkg/rtc/room.go` and `LK:pkg/service/roommanager.go`:

- a room's creation makes one dispatch per `agents` entry (or the default ``agent_name=""`` one)
  and starts their JobRequests, then sends room_started; later jobs come only from CreateDispatch;
- participant_joined when a participant is connected (ACTIVE); participant_left with its
  `disconnect_reason` when a connected one is removed, participant_connection_aborted otherwise;
- an agent participant leaving ends its job JS_FAILED "agent worker left the room";
- a room closes `empty_timeout` s after creation if nobody ever joined, `departure_timeout` s after
  its last participant left, or on DeleteRoom (everyone leaves with ROOM_DELETED): room_finished.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from livekit.protocol import agent_dispatch, models, webhook

from . import events as ev
from . import ids
from .dispatcher import Dispatcher
from .webhooks import WebhookNotifier

log = logging.getLogger(__name__)

Reason = models.DisconnectReason
KINDS = {
    "agent": models.ParticipantInfo.Kind.AGENT,
    "sip": models.ParticipantInfo.Kind.SIP,
    "egress": models.ParticipantInfo.Kind.EGRESS,
    "ingress": models.ParticipantInfo.Kind.INGRESS,
}


class Link(Protocol):
    """A participant's connection (the lab transport, a SIP leg): told of others' presence and
    of its own removal by the server."""

    def presence(self, event: str, info: models.ParticipantInfo) -> None: ...

    def removed(self, reason: int) -> None: ...


@runtime_checkable
class Ears(Protocol):
    """A link that hears: the room's audio from every other participant is relayed to it."""

    def audio(self, sender: str, pcm: bytes) -> None: ...


@dataclass(eq=False, kw_only=True)
class Participant:
    info: models.ParticipantInfo
    link: Link | None = None


@dataclass(eq=False, kw_only=True)
class Room:
    proto: models.Room
    participants: dict[str, Participant] = field(default_factory=dict)
    dispatches: dict[str, agent_dispatch.AgentDispatch] = field(default_factory=dict)
    agent_jobs: dict[str, str] = field(default_factory=dict)
    """Agent participant identity → job id."""
    timer: asyncio.TimerHandle | None = None
    closed: bool = False

    @property
    def name(self) -> str:
        return self.proto.name


class RoomManager:
    """Every room of the (single-node) stand-in."""

    def __init__(self, dispatcher: Dispatcher, notifier: WebhookNotifier) -> None:
        self.dispatcher = dispatcher
        self.notifier = notifier
        self.config = dispatcher.config
        self.rooms: dict[str, Room] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    async def aclose(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    # -- rooms ---------------------------------------------------------------------------------

    def create_room(
        self,
        name: str,
        *,
        empty_timeout: int = 0,
        departure_timeout: int = 0,
        max_participants: int = 0,
        metadata: str = "",
        agents: Iterable[agent_dispatch.RoomAgentDispatch] = (),
    ) -> tuple[Room, bool]:
        """The room `name`, created if absent (then ``True``): its dispatches and their jobs start,
        room_started is sent. Timeouts of 0 take the server defaults (300 s and 20 s)."""
        if (room := self.rooms.get(name)) is not None:
            return room, False
        now = time.time()
        proto = models.Room(
            sid=ids.new_id(ids.ROOM),
            name=name,
            metadata=metadata,
            empty_timeout=empty_timeout or self.config.empty_timeout_s,
            departure_timeout=departure_timeout or self.config.departure_timeout_s,
            max_participants=max_participants,
            creation_time=int(now),
            creation_time_ms=int(now * 1000),
        )
        room = self.rooms[name] = Room(proto=proto)
        for rad in list(agents) or [agent_dispatch.RoomAgentDispatch()]:
            d = self._new_dispatch(
                room, rad.agent_name, rad.metadata, dict(rad.attributes), rad.deployment
            )
            self._launch(room, d)
        self._send("room_started", room)
        self._arm(room, proto.empty_timeout)
        return room, True

    def delete_room(self, name: str) -> bool:
        """Remove everyone with ROOM_DELETED, then close the room; False if it does not exist."""
        room = self.rooms.get(name)
        if room is None:
            return False
        for p in list(room.participants.values()):
            self.remove(room, p, Reason.ROOM_DELETED)
        self._close(room)
        return True

    def _close(self, room: Room) -> None:
        if room.closed:
            return
        room.closed = True
        if room.timer is not None:
            room.timer.cancel()
        self.rooms.pop(room.name, None)
        self._send("room_finished", room)
        self.dispatcher.events.append(ev.RoomFinished(room=room.name))

    def _arm(self, room: Room, seconds: float) -> None:
        if room.timer is not None:
            room.timer.cancel()
        room.timer = asyncio.get_running_loop().call_later(seconds, self._idle, room)

    def _idle(self, room: Room) -> None:
        if not room.participants:
            log.info("room %s closing: empty", room.name)
            self._close(room)

    # -- dispatches ----------------------------------------------------------------------------

    def _new_dispatch(
        self,
        room: Room,
        agent_name: str,
        metadata: str,
        attributes: dict[str, str] | None = None,
        deployment: str = "",
        dispatch_id: str = "",
    ) -> agent_dispatch.AgentDispatch:
        d = agent_dispatch.AgentDispatch(
            id=dispatch_id or ids.new_id(ids.DISPATCH),
            agent_name=agent_name,
            room=room.name,
            metadata=metadata,
            deployment=deployment,
        )
        d.attributes.update(attributes or {})
        d.state.created_at = time.time_ns()
        room.dispatches[d.id] = d
        return d

    def add_dispatch(
        self, room: Room, req: agent_dispatch.CreateAgentDispatchRequest, *, dispatch_id: str = ""
    ) -> agent_dispatch.AgentDispatch:
        """CreateDispatch: a dispatch whose JobRequest starts now (`LK:pkg/rtc/room.go:L883`)."""
        d = self._new_dispatch(
            room, req.agent_name, req.metadata, dict(req.attributes), req.deployment, dispatch_id
        )
        self.dispatcher.events.append(
            ev.DispatchCreated(
                room=room.name, dispatch_id=d.id, agent_name=d.agent_name, metadata=d.metadata
            )
        )
        self._launch(room, d)
        return d

    def delete_dispatch(self, room: Room, dispatch_id: str) -> agent_dispatch.AgentDispatch | None:
        """DeleteDispatch: its running jobs get `JobTermination`; None if the id is unknown."""
        d = room.dispatches.pop(dispatch_id, None)
        if d is None:
            return None
        for job in d.state.jobs:
            self.dispatcher.terminate_job(job.id, agent_left=False)
        d.state.deleted_at = time.time_ns()
        return d

    def _launch(self, room: Room, d: agent_dispatch.AgentDispatch) -> None:
        async def run() -> None:
            job = await self.dispatcher.request_job(room.proto, d)
            if job is not None:
                d.state.jobs.append(job)  # a copy; `dispatches_of` refreshes it
                if job.state.participant_identity:
                    room.agent_jobs[job.state.participant_identity] = job.id

        task = asyncio.create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def dispatches_of(self, room: Room) -> list[agent_dispatch.AgentDispatch]:
        """The room's dispatches with each job's current server-side state."""
        for d in room.dispatches.values():
            for job in d.state.jobs:
                if (live := self.dispatcher.jobs.get(job.id)) is not None:
                    job.CopyFrom(live)
        return list(room.dispatches.values())

    # -- participants --------------------------------------------------------------------------

    def join(self, room: Room, info: models.ParticipantInfo, link: Link | None) -> Participant:
        """A participant is connected: ACTIVE, participant_joined. A participant of the same
        identity already there is removed with DUPLICATE_IDENTITY first."""
        if (old := room.participants.get(info.identity)) is not None:
            self.remove(room, old, Reason.DUPLICATE_IDENTITY)
        now = time.time()
        info.sid = info.sid or ids.new_id(ids.PARTICIPANT)
        info.state = models.ParticipantInfo.State.ACTIVE
        info.joined_at, info.joined_at_ms = int(now), int(now * 1000)
        p = room.participants[info.identity] = Participant(info=info, link=link)
        room.proto.num_participants = len(room.participants)
        if room.timer is not None:
            room.timer.cancel()
            room.timer = None
        self._tell(room, "participant_joined", p)
        self.dispatcher.events.append(
            ev.ParticipantJoined(room=room.name, identity=info.identity, kind=info.kind)
        )
        self._send("participant_joined", room, p.info)
        return p

    def remove(self, room: Room, p: Participant, reason: int) -> None:
        """Remove `p` with `reason`: participant_left (or _connection_aborted if it never
        connected); an agent's job ends JS_FAILED; the departure timer starts when empty."""
        if room.participants.get(p.info.identity) is not p:
            return
        del room.participants[p.info.identity]
        room.proto.num_participants = len(room.participants)
        connected = p.info.state == models.ParticipantInfo.State.ACTIVE
        p.info.state = models.ParticipantInfo.State.DISCONNECTED
        p.info.disconnect_reason = reason  # type: ignore[assignment]
        if (job_id := room.agent_jobs.pop(p.info.identity, None)) is not None:
            self.dispatcher.terminate_job(job_id, agent_left=True)
        if p.link is not None:
            p.link.removed(reason)
        self._tell(room, "participant_left", p)
        self.dispatcher.events.append(
            ev.ParticipantLeft(
                room=room.name, identity=p.info.identity, kind=p.info.kind, reason=reason
            )
        )
        event = "participant_left" if connected else "participant_connection_aborted"
        self._send(event, room, p.info)
        if not room.participants and not room.closed:
            self._arm(room, room.proto.departure_timeout)

    def set_attributes(self, room: Room, p: Participant, attributes: dict[str, str]) -> None:
        """Update `p`'s attributes (``""`` deletes a key, as `UpdateParticipant` does) and tell
        the others ``participant_attributes_changed``; nothing if `p` has left."""
        if room.participants.get(p.info.identity) is not p:
            return
        for key, value in attributes.items():
            if value:
                p.info.attributes[key] = value
            else:
                p.info.attributes.pop(key, None)
        self._tell(room, "participant_attributes_changed", p)

    def _tell(self, room: Room, event: str, p: Participant) -> None:
        for other in room.participants.values():
            if other is not p and other.link is not None:
                other.link.presence(event, p.info)

    def _send(
        self, event: str, room: Room, participant: models.ParticipantInfo | None = None
    ) -> None:
        msg = webhook.WebhookEvent(event=event)
        msg.room.CopyFrom(room.proto)
        if participant is not None:
            msg.participant.CopyFrom(participant)
        self.notifier.notify(msg)
