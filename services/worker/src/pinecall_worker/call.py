"""The call a job runs.

Today the job joins its room and holds it until the job ends, telling the worker's measures how the
call ended; the AgentSession (silero, Deepgram, Anthropic, Cartesia) and the entries writer come
with the vendor fakes and call-log (issues 4 and 5), which is where this module grows.
"""

from __future__ import annotations

import asyncio

from livekit.agents import JobContext

from pinecall_contracts.worker import CallEnded
from pinecall_worker.measures import report
from pinecall_worker.settings import WorkerSettings


async def entrypoint(ctx: JobContext) -> None:
    """Join the room (over the lab transport under the stand-in) and hold it until the job ends."""
    settings = WorkerSettings.from_env()
    ended = asyncio.Event()

    async def on_shutdown(_reason: str) -> None:
        report(
            settings.measures_socket,
            CallEnded(call=ctx.job.room.name or ctx.job.id, outcome="completed"),
        )
        ended.set()

    ctx.add_shutdown_callback(on_shutdown)
    if settings.lab_rooms:
        from pinecall_labroom.jobs import join_job_room

        await join_job_room(ctx)
    else:
        await ctx.connect()
