"""The ``answer`` job: an AgentSession answers the caller, and every turn goes on the call's log.

How a call ends, and the outcome the log gets (the first that happens wins):

====================================================  ============================
what happened                                         outcome
====================================================  ============================
the agent ran ``end_call`` (livekit-agents'           completed
``EndCallTool``: it says goodbye, deletes the room)
the caller left the room                              caller_hangup
the session closed on an error (a vendor failed       failed
past livekit-agents' tolerance), or the job crashed
the job was shut down from outside: the worker's      drained, cause ``shutdown``
drain past its timeout, LiveKit's JobTermination
(a deleted dispatch)
the room went                                         drained, cause ``room_gone``
====================================================  ============================

A job process that dies takes none of these paths: the worker's main process ends its call
``failed`` (``pinecall_worker.jobs``). In production the job joins its room with
``ctx.connect()`` (``session.start(room=…)``, whose RoomIO closes the session when the caller
leaves); under the LiveKit stand-in (``PINECALL_LAB_ROOMS``) it joins over the lab transport and
watches the room's presence itself, and ends the job itself when the call ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

from livekit.agents import (
    Agent,
    CloseEvent,
    CloseReason,
    ConversationItemAddedEvent,
    ErrorEvent,
    FunctionToolsExecutedEvent,
    JobContext,
)
from livekit.agents.beta.tools import EndCallTool
from livekit.agents.llm import Toolset

from pinecall_clients.calllog import CallLogClient
from pinecall_contracts import entries
from pinecall_contracts.dispatch import JobOffer
from pinecall_worker.call.record import Recorder
from pinecall_worker.call.session import model_client, session_for
from pinecall_worker.domain import opens_first, shutdown_cause
from pinecall_worker.settings import WorkerSettings

_log = logging.getLogger(__name__)

_SOURCES = {"stt_error": "stt", "llm_error": "llm", "tts_error": "tts"}


def follow(session: Any, recorder: Recorder) -> None:
    """Write what ``session`` says onto ``recorder``: turns, tools, errors, how it closed."""

    def on_item(ev: ConversationItemAddedEvent) -> None:
        item = ev.item
        if item.type != "message":
            return
        text = item.text_content or ""
        if item.role == "user":
            stopped = item.metrics.get("stopped_speaking_at")
            recorder.user_turn(text, stopped_at=stopped, at=item.created_at)
        elif item.role == "assistant":
            metrics = dict(item.metrics)
            recorder.agent_turn(text, metrics, interrupted=item.interrupted, at=item.created_at)

    def on_tools(ev: FunctionToolsExecutedEvent) -> None:
        for called, output in ev.zipped():
            recorder.add(
                entries.TURN_TOOL,
                {
                    "id": called.call_id,
                    "name": called.name,
                    "arguments": called.arguments,
                    "output": output.output if output is not None else None,
                    "error": bool(output is not None and output.is_error),
                },
                at=called.created_at,
            )

    def on_error(ev: ErrorEvent) -> None:
        error = ev.error
        source = _SOURCES.get(getattr(error, "type", ""), "session")
        what = str(getattr(error, "error", error))
        recoverable = bool(getattr(error, "recoverable", False))
        recorder.error(source, what, recoverable=recoverable, at=ev.created_at)

    def on_close(ev: CloseEvent) -> None:
        if ev.error is not None:
            recorder.settle("failed", f"session error: {ev.error.error}"[:2000])
        elif ev.reason is CloseReason.PARTICIPANT_DISCONNECTED:
            recorder.settle("caller_hangup")
        elif ev.reason is CloseReason.TASK_COMPLETED:
            recorder.settle("completed")

    session.on("conversation_item_added", on_item)
    session.on("function_tools_executed", on_tools)
    session.on("error", on_error)
    session.on("close", on_close)


async def answer(ctx: JobContext, settings: WorkerSettings, offer: JobOffer) -> None:
    """Answer the caller of ``offer``'s call in the job's room; returns once the session runs
    (the job ends when the call does: its shutdown writes the end)."""
    client = CallLogClient(settings.call_log_url, settings.fleet_key or "")
    recorder = Recorder(
        client,
        offer,
        worker=ctx.job.agent_name or settings.fleet,
        measures=settings.measures_socket,
        on_refused=lambda why: ctx.shutdown(f"the log refused the call: {why}"),
    )
    # what the shutdown closes, last first: the caller's watch, the session, its model client
    held = contextlib.AsyncExitStack()

    async def on_shutdown(reason: str) -> None:
        await held.aclose()
        if reason == "job crashed":
            await recorder.finish("failed", reason)
        else:
            await recorder.finish("drained", reason, cause=shutdown_cause(reason))
        await client.aclose()

    # first, so a job that crashes from here on still ends its call failed on the log
    ctx.add_shutdown_callback(on_shutdown)
    recorder.start()
    vad = ctx.proc.userdata.get("vad")
    if vad is None:
        from livekit.plugins import silero

        vad = silero.VAD.load()
    llm_client = model_client(settings)
    held.push_async_callback(llm_client.close)
    session = session_for(settings, vad, llm_client)
    held.push_async_callback(session.aclose)
    follow(session, recorder)

    def ended(reason: str) -> None:
        ctx.shutdown(reason)

    session.on("close", lambda ev: ended(f"session closed: {ev.reason.value}"))

    async def agent_ends_it(_: Toolset.ToolCalledEvent) -> None:
        recorder.settle("completed", "the agent ended the call")

    agent = Agent(
        instructions=settings.instructions, tools=[EndCallTool(on_tool_called=agent_ends_it)]
    )
    reoffer_at = offer.reoffer_at.timestamp() if offer.reoffer_at else None
    if opens_first(reoffer_at, time.time()):
        _log.info("call %s: started close to its re-offer; opening it before joining", offer.call)
        if not await recorder.open_settled():
            ctx.shutdown(f"the call was not opened: {recorder.refused}")
            return  # another agent holds the call: the caller never hears this one
    if settings.lab_rooms:
        from pinecall_labroom.agents import wire_session
        from pinecall_labroom.jobs import join_job_room

        room = await join_job_room(ctx)
        wire_session(session, room)
        watching = asyncio.create_task(_watch_caller(room, recorder, ended))
        held.push_async_callback(_cancelled, watching)
        await session.start(agent)
    else:
        await ctx.connect()
        await session.start(agent, room=ctx.room)


async def _cancelled(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def _watch_caller(room: Any, recorder: Recorder, ended: Any) -> None:
    """Under the stand-in: the call ends when its last caller leaves (caller_hangup) or the room
    goes (drained, unless the agent ended it)."""
    while True:
        get = asyncio.ensure_future(room.presence.get())
        closed = asyncio.ensure_future(room.closed.wait())
        done, _ = await asyncio.wait({get, closed}, return_when=asyncio.FIRST_COMPLETED)
        closed.cancel()
        if get not in done:
            get.cancel()
            recorder.settle("drained", "the room went", cause="room_gone")
            ended("the room went")
            return
        event = get.result()
        if event.get("type") == "participant_left" and not any(
            p.get("kind") != "AGENT" for p in room.participants.values()
        ):
            recorder.end_soon("caller_hangup")
            ended("the caller left")
            return
