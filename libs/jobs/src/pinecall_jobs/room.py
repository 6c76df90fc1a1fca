"""The job's room as a job that only speaks needs it: joined, who else is in it, its deletion.

In production the job joins with ``ctx.connect()`` subscribing to nothing (no ears), and its
session speaks through livekit-agents' RoomIO with the audio input off. Under the LiveKit stand-in
(``PINECALL_LAB_ROOMS``), which has no SFU, it joins over the lab transport with its job's own
token (:func:`pinecall_labroom.jobs.join_job_room`) and speaks through
:class:`pinecall_labroom.agents.LabAudioOutput` (``shared/DESIGN.md``, "How it is tested").

Deleting the room is RoomService ``DeleteRoom`` (``roomCreate`` grant; ``not_found`` when it is
gone, ``shared/reference/livekit-protocol.md`` §4.2): every participant leaves with ROOM_DELETED
and LiveKit sends room_finished (§3.3), which hangs the caller up.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import aiohttp
import stamina
from livekit import api, rtc
from livekit.agents import Agent, AgentSession, AutoSubscribe, JobContext
from livekit.agents.voice.room_io import RoomOptions

if TYPE_CHECKING:
    from pinecall_labroom import LabRoom

_log = logging.getLogger(__name__)

PHONE_NUMBER = "sip.phoneNumber"
"""The attribute LiveKit SIP gives a phone caller's participant: the caller's number."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LiveKitAccess:
    """A LiveKit's URL (``http(s)://`` or ``ws(s)://``) and an API key that may delete rooms."""

    url: str
    api_key: str
    api_secret: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Caller:
    """Another participant of the room: identity, LiveKit's kind name (``SIP``, ``STANDARD``)
    and attributes."""

    identity: str
    kind: str
    attributes: Mapping[str, str]

    @property
    def number(self) -> str | None:
        """A phone caller's number (``sip.phoneNumber``), None for anyone else."""
        return self.attributes.get(PHONE_NUMBER) if self.kind == "SIP" else None


def _kind_name(kind: rtc.ParticipantKind.ValueType) -> str:
    return str(rtc.ParticipantKind.Name(kind)).removeprefix("PARTICIPANT_KIND_")


class JobRoom:
    """A job's joined room; make it with :meth:`join`."""

    def __init__(self, ctx: JobContext, lab: LabRoom | None) -> None:
        self.ctx = ctx
        self.lab = lab
        self.name = ctx.job.room.name

    @classmethod
    async def join(cls, ctx: JobContext, *, lab_rooms: bool) -> JobRoom:
        """Join as the job's agent: ``ctx.connect()``, or the lab room under the stand-in."""
        if lab_rooms:
            from pinecall_labroom.jobs import join_job_room

            return cls(ctx, await join_job_room(ctx))
        await ctx.connect(auto_subscribe=AutoSubscribe.SUBSCRIBE_NONE)
        return cls(ctx, None)

    def callers(self) -> list[Caller]:
        """Everyone in the room but agents, as the room knows them now."""
        if self.lab is not None:
            return [
                Caller(identity=p["identity"], kind=p["kind"], attributes=p.get("attributes", {}))
                for p in self.lab.participants.values()
                if p["kind"] != "AGENT"
            ]
        return [
            Caller(identity=p.identity, kind=_kind_name(p.kind), attributes=dict(p.attributes))
            for p in self.ctx.room.remote_participants.values()
            if p.kind != rtc.ParticipantKind.PARTICIPANT_KIND_AGENT
        ]

    async def start(self, session: AgentSession[Any], agent: Agent) -> None:
        """Start ``session`` speaking into the room, hearing nothing."""
        if self.lab is not None:
            from pinecall_labroom.agents import LabAudioOutput

            session.output.audio = LabAudioOutput(self.lab)
            await session.start(agent)
            return
        options = RoomOptions(audio_input=False, text_input=False)
        await session.start(agent, room=self.ctx.room, room_options=options)


async def delete_room(livekit: LiveKitAccess, room: str, *, within_s: float = 10.0) -> bool:
    """DeleteRoom ``room``: True if it was deleted, False if LiveKit no longer has it.

    Retried (stamina) while LiveKit does not answer, for ``within_s`` seconds; then the error is
    raised (``aiohttp.ClientError``); a room left behind is the reaper's. Another Twirp error
    (a key that may not delete rooms) is raised as livekit-api's ``ServerError``.
    """
    async with api.LiveKitAPI(livekit.url, livekit.api_key, livekit.api_secret) as lk:
        async for attempt in stamina.retry_context(
            on=aiohttp.ClientError, attempts=None, timeout=within_s, wait_initial=0.2, wait_max=2.0
        ).with_name("LiveKit DeleteRoom", (), {"room": room}):  # what a retry's log line says
            with attempt:
                try:
                    await lk.room.delete_room(api.DeleteRoomRequest(room=room))
                except api.ServerError as exc:
                    if exc.code == api.ServerErrorCode.NOT_FOUND:
                        return False
                    raise
    _log.info("room %s deleted", room)
    return True
