"""The call a job runs: an AgentSession with silero, Deepgram, Anthropic and Cartesia.

Each turn's first audio (``e2e_latency``), each error and how the call ended go to the worker's
measures socket (seed 000, "A worker that is up but bad"). The vendor plugins are imported here,
at the top, and the worker imports this module before it registers, so livekit-agents' forkserver
preloads them once and every call's process inherits them (seed 000: 3–5 s a call before, 0.1 s
after). In production the job joins its room with ``ctx.connect()``; under the LiveKit stand-in
(``PINECALL_LAB_ROOMS``) it joins over the lab transport and wires the same session to it.
Still to come with call-log (issue 5): the call opened on the log, its entries written through
the call-log writer, the prompt and tools from the call's config.
"""

from __future__ import annotations

import logging
from typing import Any

from anthropic import AsyncAnthropic
from livekit.agents import (
    Agent,
    AgentSession,
    CloseEvent,
    ConversationItemAddedEvent,
    ErrorEvent,
    JobContext,
    JobProcess,
)
from livekit.plugins import anthropic, cartesia, deepgram, silero

from pinecall_contracts.worker import CallEnded, CallError, TurnMeasured
from pinecall_worker.measures import report
from pinecall_worker.settings import WorkerSettings

_log = logging.getLogger(__name__)


def prewarm(proc: JobProcess) -> None:
    """Load silero's model once per job process, before any call is given to it."""
    proc.userdata["vad"] = silero.VAD.load()


def model_client(settings: WorkerSettings) -> AsyncAnthropic:
    """The Anthropic client of one call, owned by the call so it is closed when the call ends.

    livekit-plugins-anthropic 1.8.9 builds a client it never closes (``llm.py`` L137-150); this
    one has the same settings (no SDK retries: livekit-agents retries; 30 s to read).
    """
    return AsyncAnthropic(
        api_key=settings.anthropic_api_key,
        base_url=settings.anthropic_url,
        max_retries=0,
        timeout=30.0,
    )


def session_for(settings: WorkerSettings, vad: Any, client: AsyncAnthropic) -> AgentSession[Any]:
    """The call's pipeline, each vendor at its configured base URL."""

    def given(**kwargs: Any) -> dict[str, Any]:
        return {k: v for k, v in kwargs.items() if v is not None}

    return AgentSession(
        vad=vad,
        stt=deepgram.STT(
            **given(base_url=settings.deepgram_url, api_key=settings.deepgram_api_key)
        ),
        llm=anthropic.LLM(model=settings.model, client=client),
        # the end of a turn by silero's VAD: chosen, not the auto-selected turn-detector model,
        # which runs a model per turn and waited 0.58 s or 2.5 s at random in the lab
        turn_handling={"turn_detection": "vad"},
        tts=cartesia.TTS(
            **given(base_url=settings.cartesia_url, api_key=settings.cartesia_api_key)
        ),
    )


async def entrypoint(ctx: JobContext) -> None:
    """Answer the call in the job's room and measure every turn until it ends."""
    settings = WorkerSettings.from_env()
    call = ctx.job.room.name or ctx.job.id
    vad = ctx.proc.userdata.get("vad") or silero.VAD.load()
    client = model_client(settings)
    session = session_for(settings, vad, client)
    failed = False

    def on_item(ev: ConversationItemAddedEvent) -> None:
        item = ev.item
        if item.type == "message" and item.role == "assistant":
            e2e = item.metrics.get("e2e_latency")
            if e2e is not None:
                report(settings.measures_socket, TurnMeasured(call=call, first_audio_s=e2e))

    def on_error(ev: ErrorEvent) -> None:
        report(settings.measures_socket, CallError(call=call, what=str(ev.error)[:200]))

    def on_close(ev: CloseEvent) -> None:
        nonlocal failed
        failed = ev.error is not None

    async def on_shutdown(_reason: str) -> None:
        report(
            settings.measures_socket,
            CallEnded(call=call, outcome="failed" if failed else "completed", failed=failed),
        )
        await session.aclose()
        await client.close()

    session.on("conversation_item_added", on_item)
    session.on("error", on_error)
    session.on("close", on_close)
    ctx.add_shutdown_callback(on_shutdown)
    agent = Agent(instructions=settings.instructions)
    if settings.lab_rooms:
        from pinecall_labroom.agents import wire_session
        from pinecall_labroom.jobs import join_job_room

        room = await join_job_room(ctx)
        wire_session(session, room)
        await session.start(agent)
    else:
        await ctx.connect()
        await session.start(agent, room=ctx.room)
