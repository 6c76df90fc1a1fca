"""One LiveKit's rooms as the reaper reads them, through the LiveKit adapter
(:mod:`pinecall_clients.livekit`; reference §4.2).

``ListRooms`` (``roomList``) gives every room with its participant count and creation time;
``ListParticipants`` (``roomAdmin``) says whether an agent is in one (kind ``AGENT``);
``DeleteRoom`` (``roomCreate``) takes one down: its participants leave with ROOM_DELETED and
LiveKit sends room_finished. A room that is gone is an answer here (None, False), not an error.
Errors: the adapter's ``LiveKitError``, ``LiveKitUnavailable`` when LiveKit does not answer and
``LiveKitRefused`` when it refuses (a bad key): nothing is judged on its view.
"""

from __future__ import annotations

from pinecall_clients.livekit import LiveKit, LiveKitAccess, RoomGone
from pinecall_reaper.domain import RoomSeen


class Rooms:
    """The rooms of one LiveKit; close with :meth:`aclose`."""

    def __init__(self, access: LiveKitAccess) -> None:
        self.livekit = LiveKit(access)

    async def aclose(self) -> None:
        await self.livekit.aclose()

    async def listed(self) -> dict[str, RoomSeen]:
        """Every room, by name."""
        return {
            r.name: RoomSeen(name=r.name, created_at=r.created_at, participants=r.participants)
            for r in await self.livekit.rooms()
        }

    async def agents(self, room: str) -> int | None:
        """How many agent participants ``room`` holds; None if LiveKit has no such room."""
        try:
            people = await self.livekit.participants(room)
        except RoomGone:
            return None
        return sum(1 for p in people if p.kind == "AGENT")

    async def delete(self, room: str) -> bool:
        """Take ``room`` down; False if it was gone already (another replica, its last caller)."""
        return await self.livekit.delete_room(room)
