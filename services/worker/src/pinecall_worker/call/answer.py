"""The ``answer`` job: an AgentSession answers the caller, and every turn goes on the call's log.

The call runs on the agent it opened with (:mod:`.agent`): the job opens the call first (at most
:data:`OPEN_WAIT_S`; past it, the worker's defaults answer) and builds the session on the
version's prompt, voice, model, language and tools (:mod:`.tools`, beside livekit-agents'
``EndCallTool``); its greeting, when it has one, is said first. An outbound call is held on the
log first, then dialled (:mod:`.dial`), and its session built once the callee answered, so the
greeting is the first thing the callee hears. The app's commands and the call's
limit steer it from outside (:mod:`.steer`).

How a call ends, and the outcome the log gets (the first that happens wins):

====================================================  ============================
what happened                                         outcome
====================================================  ============================
the agent ran ``end_call`` (livekit-agents'           completed
``EndCallTool``: it says goodbye, deletes the room)
the app's ``end`` command (its text said, the room     completed
deleted)
the call reached its limit (``max_call_seconds``:      timeout
``PINECALL_LIMIT_SAYS`` said, the room deleted)
the caller left the room                              caller_hangup
the session closed on an error (a vendor failed       failed
past livekit-agents' tolerance), or the job crashed
an outbound call's phone not answered (busy, no       not_reached, the SIP status
answer, failed: :mod:`.dial`)
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
    stt,
    tts,
)
from livekit.agents.beta.tools import EndCallTool
from livekit.agents.llm import Toolset
from opentelemetry import context as otel_context

from pinecall_clients.calllog import CallLogClient
from pinecall_contracts import entries
from pinecall_contracts.dispatch import JobOffer
from pinecall_jobs.recording import CallRecording
from pinecall_jobs.tools import app_tools
from pinecall_worker.call import recording as recordings
from pinecall_worker.call.agent import call_agent
from pinecall_worker.call.dial import dial_callee
from pinecall_worker.call.record import Recorder
from pinecall_worker.call.session import model_client, session_for
from pinecall_worker.call.steer import Steering
from pinecall_worker.domain import opens_first, shutdown_cause
from pinecall_worker.relay import relay_client
from pinecall_worker.settings import WorkerSettings

_log = logging.getLogger(__name__)

_SOURCES = {"stt_error": "stt", "llm_error": "llm", "tts_error": "tts"}
OPEN_WAIT_S = 5.0
"""The longest a job waits for the log to open its call (and say its agent) before it answers
on the worker's own defaults: a call-log that does not answer leaves no caller in silence."""
VENDORS_CLOSE_S = 2.0
"""The longest a sealed call's job spends closing its vendors' sockets: aiohttp waits 10 s for
each close frame a vendor does not answer; past this the sockets are dropped."""


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
    """Answer the caller of ``offer``'s call in the job's room, on the agent the call opened
    with; returns once the session runs (the job ends when the call does: its shutdown writes
    the end). A call whose agent records is recorded from the session's start
    (:mod:`.recording`)."""
    client = CallLogClient(settings.call_log_url, settings.fleet_key or "")
    # the batches go with the worker's other calls' (its relay socket), when it has one
    relay = (
        relay_client(settings.relay_socket, settings.fleet_key or "")
        if settings.relay_socket
        else None
    )
    recorder = Recorder(
        client,
        offer,
        sender=relay,
        worker=ctx.job.agent_name or settings.fleet,
        measures=settings.measures_socket,
        on_refused=lambda why: ctx.shutdown(f"the log refused the call: {why}"),
    )
    # what the shutdown closes, last first: the steering, the caller's watch, the session, its
    # model client
    held = contextlib.AsyncExitStack()
    # the session's ears and voice, closed once the call is sealed
    vendors: list[stt.STT[Any] | tts.TTS[Any]] = []
    recording: CallRecording | None = None  # the call's, once its session runs and it records

    job_context = otel_context.get_current()  # the job's span, in its call's trace

    async def on_shutdown(reason: str) -> None:
        # livekit-agents runs it from its own task: its end and seal go in the call's trace
        token = otel_context.attach(job_context)
        try:
            try:
                await held.aclose()
            except Exception:  # the recording is still closed, the call still ended on its log
                _log.exception("call %s: closing its session failed", offer.call)
            try:
                # the recorder closed and its encode thread ended before the job goes on to exit
                await recordings.finish(recording, recorder)  # on the log before the end, seal
                if reason == "job crashed":
                    await recorder.finish("failed", reason)
                else:
                    await recorder.finish("drained", reason, cause=shutdown_cause(reason))
            finally:
                await close_vendors(vendors)
            await client.aclose()
            if relay is not None:
                await relay.aclose()
        finally:
            otel_context.detach(token)

    # first, so a job that crashes from here on still ends its call failed on the log
    ctx.add_shutdown_callback(on_shutdown)
    started = time.time()
    outbound = offer.caller == "outbound" and offer.number is not None
    recorder.start()
    # a job close to its re-offer opens the call before it joins: the room may be another's
    reoffer_at = offer.reoffer_at.timestamp() if offer.reoffer_at else None
    # an outbound call is held before anything else: a job the log refuses never dials (.dial)
    if outbound or opens_first(reoffer_at, started):
        _log.info("call %s: opening it before joining", offer.call)
        if not await recorder.open_settled():
            ctx.shutdown(f"the call was not opened: {recorder.refused}")
            return  # another agent holds the call: the caller never hears this one
    # the room is joined while the log opens the call, whose answer is what the call runs on:
    # its agent's version (waited for OPEN_WAIT_S at most)
    joining = asyncio.ensure_future(_join(ctx, settings))
    try:
        async with asyncio.timeout(OPEN_WAIT_S):
            await recorder.open_settled()
    except TimeoutError:
        _log.warning(
            "call %s: the log did not open it in %g s; answering on the worker's defaults",
            offer.call,
            OPEN_WAIT_S,
        )
    room = await joining
    if recorder.refused is not None:
        ctx.shutdown(f"the call was not opened: {recorder.refused}")
        return  # another agent holds the call: the caller never hears this one
    if outbound and not await dial_callee(ctx, offer, recorder, settings.ringing_timeout_s):
        return  # not reached: the call ends so, its room goes with the job
    runs = call_agent(settings, recorder.record)
    vad = ctx.proc.userdata.get("vad")
    if vad is None:
        from livekit.plugins import silero

        vad = silero.VAD.load()
    llm_client = model_client(settings)
    held.push_async_callback(llm_client.close)
    session = session_for(settings, vad, llm_client, runs)
    vendors.extend(p for p in (session.stt, session.tts) if p is not None)
    held.push_async_callback(session.aclose)
    follow(session, recorder)

    def ended(reason: str) -> None:
        recorder.closed()  # the end on the log says now, not when the log hears it
        if recording is not None:  # the file ends with the call, not with the job's shutdown
            recording.stop()
        ctx.shutdown(reason)

    session.on("close", lambda ev: ended(f"session closed: {ev.reason.value}"))

    async def agent_ends_it(_: Toolset.ToolCalledEvent) -> None:
        recorder.settle("completed", "the agent ended the call")

    tools: list[Any] = [EndCallTool(on_tool_called=agent_ends_it)]
    agent = Agent(
        instructions=runs.instructions,
        tools=tools + app_tools(client, offer.call, runs.tools),
    )
    if settings.lab_rooms:
        from pinecall_labroom.agents import wire_session

        wire_session(session, room)
        watching = asyncio.create_task(_watch_caller(room, recorder, ended))
        held.push_async_callback(_cancelled, watching)
    elif runs.record:  # the session's room audio, made here so the recorder wraps it first
        held.push_async_callback(await recordings.room_audio(ctx, session))
    if runs.record:  # before the session starts: the caller's first words are recorded too
        recording = await recordings.record(settings, offer, session, recorder)
    if settings.lab_rooms or runs.record:
        await session.start(agent)
    else:
        await session.start(agent, room=ctx.room)
    if runs.greeting:
        session.say(runs.greeting)
    steering = Steering(ctx, session, recorder, client)
    record = recorder.record
    opened_at = record.opened_at.timestamp() if record is not None else started
    limit = steering.keep_to(runs.max_call_seconds, opened_at, settings.limit_says)
    for task in (asyncio.create_task(limit), asyncio.create_task(_commands(recorder, steering))):
        held.push_async_callback(_cancelled, task)


async def close_vendors(vendors: list[stt.STT[Any] | tts.TTS[Any]]) -> None:
    """Close the session's STT and TTS, each socket with its close frame, at once and each within
    :data:`VENDORS_CLOSE_S`. ``AgentSession.aclose`` closes its streams, not its plugins
    (livekit-agents 1.8.9), and Cartesia's pool keeps the socket its prewarm opened: unclosed, it
    went with the job (1006 at Cartesia). Run after the seal, so a vendor that does not answer
    never holds a call's end on its log."""

    async def close(vendor: stt.STT[Any] | tts.TTS[Any]) -> None:
        try:
            async with asyncio.timeout(VENDORS_CLOSE_S):
                await vendor.aclose()
        except TimeoutError:
            _log.warning(
                "%s's sockets did not close in %g s: dropped", vendor.provider, VENDORS_CLOSE_S
            )
        except Exception:
            _log.exception("closing %s's sockets failed", vendor.provider)

    await asyncio.gather(*(close(v) for v in vendors))  # one slow or failing spares the others


async def _join(ctx: JobContext, settings: WorkerSettings) -> Any:
    """Join the job's room: over the lab transport under the stand-in (the lab room), else as
    livekit-agents does (``ctx.connect()``; the job's room)."""
    if settings.lab_rooms:
        from pinecall_labroom.jobs import join_job_room

        return await join_job_room(ctx)
    await ctx.connect()
    return ctx.room


async def _commands(recorder: Recorder, steering: Steering) -> None:
    """Follow the app's commands from the log's head at the open, once the log opened it."""
    if await recorder.open_settled() and recorder.record is not None:
        await steering.follow(recorder.record.last_seq)


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
