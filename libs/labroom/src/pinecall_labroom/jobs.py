"""Joining a job's lab room from inside a livekit-agents job.

Under the LiveKit stand-in a job cannot `ctx.connect()` (that needs an SFU); it joins its room over
the lab transport instead, with the very token and URL of its `JobAssignment`. livekit-agents
1.8.9 keeps those only on the private `JobContext._info` (`RunningJobInfo.url`/`.token`,
`livekit/agents/job.py:L219,L718`), so this is the one place that reads them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .client import LabRoom

if TYPE_CHECKING:
    from livekit.agents import JobContext


async def join_job_room(ctx: JobContext) -> LabRoom:
    """Join the job's room as its agent participant (identity and attributes from the agent token
    the server minted); leaves cleanly when the job shuts down. `JoinError` if refused."""
    info = ctx._info
    room = await LabRoom.connect(info.url, info.token)

    async def _leave(_reason: str) -> None:
        await room.leave()

    ctx.add_shutdown_callback(_leave)
    return room
