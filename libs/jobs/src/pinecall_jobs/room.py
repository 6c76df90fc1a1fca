"""The job's room as a job that only speaks needs it: joined, and who else is in it.

In production the job joins with ``ctx.connect()`` subscribing to nothing (no ears), and its
session speaks through livekit-agents' RoomIO with the audio input off. Under the LiveKit stand-in
(``PINECALL_LAB_ROOMS``), which has no SFU, it joins over the lab transport with its job's own
token (:func:`pinecall_labroom.jobs.join_job_room`) and speaks through
:class:`pinecall_labroom.agents.LabAudioOutput` (``shared/DESIGN.md``, "How it is tested").

Deleting the room is LiveKit's server API, :meth:`pinecall_clients.livekit.LiveKit.delete_room`
(the sentence job's last step).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from livekit import rtc
from livekit.agents import Agent, AgentSession, AutoSubscribe, JobContext
from livekit.agents.voice.room_io import RoomOptions

if TYPE_CHECKING:
    from pinecall_labroom import LabRoom

PHONE_NUMBER = "sip.phoneNumber"
"""The attribute LiveKit SIP gives a phone caller's participant: the caller's number."""


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
