"""Joining a job's lab room from inside a livekit-agents job.

Under the LiveKit stand-in a job cannot `ctx.connect()` (that needs an SFU); it joins its room over
the lab transport instead, with the very token and URL of its `JobAssignment`. livekit-agents
1.8.9 keeps those only on the private `JobContext._info` (`RunningJobInfo.url`/`.token`,
`livekit/agents/job.py:L219,L718`), so this is the one place that reads them.

Once joined it tells the framework so, as `ctx.connect()` would: livekit-agents learns that a job
connected only through the private `JobContext._on_connect` (`job.py` `connect`, L729), and a job
that never said it warns "The job task completed without establishing a connection" when its
entrypoint returns, and "The room connection was not established within 10 seconds" if it runs
longer (`ipc/job_proc_lazy_main.py` `_on_entry_done`, `_warn_not_connected_task`): untrue of a job
in its lab room, once per call.
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
    ctx._on_connect()  # connected: what ctx.connect() tells the framework (see above)

    async def _leave(_reason: str) -> None:
        await room.leave()

    ctx.add_shutdown_callback(_leave)
    return room
