"""Simulated callers: a phone call as LiveKit SIP brings it, and a web visitor.

A SIP call is a room of its own, created with one dispatch to the fleet's *plain* name (which no
worker holds, so that dispatch stays pending, as the runtime's design expects), and the caller
joining it as a SIP participant with LiveKit SIP's attributes (``sip.phoneNumber``,
``sip.trunkPhoneNumber``). The caller speaks and hears over the lab-room transport.
"""

from __future__ import annotations

from livekit import api

from pinecall_labroom import LabRoom


def caller_token(
    api_key: str,
    api_secret: str,
    *,
    room: str,
    identity: str,
    kind: str = "standard",
    attributes: dict[str, str] | None = None,
) -> str:
    """A participant's join token (roomJoin for `room`), as LiveKit SIP or an app would mint it."""
    tok = (
        api.AccessToken(api_key, api_secret)
        .with_identity(identity)
        .with_kind(kind)  # type: ignore[arg-type]
        .with_grants(api.VideoGrants(room_join=True, room=room))
    )
    if attributes:
        tok = tok.with_attributes(attributes)
    return tok.to_jwt()


def agent_token(api_key: str, api_secret: str, *, room: str, identity: str) -> str:
    """An agent participant's join token for `room` (kind agent, the `agent` grant), as LiveKit
    mints one for a job (``shared/reference/livekit-protocol.md`` §1.5)."""
    return (
        api.AccessToken(api_key, api_secret)
        .with_identity(identity)
        .with_kind("agent")
        .with_grants(api.VideoGrants(room_join=True, room=room, agent=True))
        .to_jwt()
    )


async def sip_call(
    lkapi: api.LiveKitAPI,
    url: str,
    api_key: str,
    api_secret: str,
    *,
    room: str,
    fleet: str,
    phone: str = "+15550100",
    trunk_phone: str = "+15550199",
    metadata: str = "",
) -> LabRoom:
    """Create `room` with a dispatch to `fleet` and join it as the SIP caller ``sip_<phone>``.

    `metadata` is the dispatch's, as a SIP dispatch rule's room config gives it (the runtime's
    ``CallRing`` JSON)."""
    await lkapi.room.create_room(
        api.CreateRoomRequest(
            name=room, agents=[api.RoomAgentDispatch(agent_name=fleet, metadata=metadata)]
        )
    )
    token = caller_token(
        api_key,
        api_secret,
        room=room,
        identity=f"sip_{phone}",
        kind="sip",
        attributes={"sip.phoneNumber": phone, "sip.trunkPhoneNumber": trunk_phone},
    )
    return await LabRoom.connect(url, token)
