"""The call's pipeline: silero, Deepgram, Anthropic (Haiku) and Cartesia, each at its base URL.

The vendor plugins are imported here, at the top, and the worker imports this module before it
registers, so livekit-agents' forkserver preloads them once and every call's process inherits
them (seed 000, "Capacity is counted in calls": 3–5 s a call before, 0.1 s after); the worker
names this module to the forkserver too (``server.modules_of``), so what it imports is preloaded.
"""

from __future__ import annotations

import ssl
from typing import Any

import anyio._backends._asyncio  # noqa: F401  (httpx's first request: 0.3–2.5 s on a job's loop)
import httpcore  # noqa: F401  (httpx imports it at its first client: 0.3–0.5 s on a job's loop)
import httpx
from anthropic import AsyncAnthropic, DefaultAsyncHttpxClient
from livekit.agents import AgentSession, JobProcess
from livekit.plugins import anthropic, cartesia, deepgram, silero

from pinecall_worker.call.agent import CallAgent
from pinecall_worker.settings import WorkerSettings

TLS: ssl.SSLContext = httpx.create_ssl_context()
"""The one TLS context of every call's model client, made at import (so in the forkserver, once,
and inherited by every job process). httpx makes a context per client it builds — certifi's
bundle read and parsed: 31 ms on an idle core of this machine, up to 975 ms on a job's loop
under ``up``'s load (issue 20's livekit-agents slow-callback warnings); with this one a client
takes 0.4–2 ms (``python -c`` timing of ``AsyncAnthropic(...)`` both ways, 2026-12-03)."""


def prewarm(proc: JobProcess) -> None:
    """Load silero's model once per job process, before any call is given to it."""
    proc.userdata["vad"] = silero.VAD.load()


def model_client(settings: WorkerSettings) -> AsyncAnthropic:
    """The Anthropic client of one call, owned by the call so it is closed when the call ends.

    livekit-plugins-anthropic 1.8.9 builds a client it never closes (``llm.py`` L137-150); this
    one has the same settings (no SDK retries: livekit-agents retries; 30 s to read) and
    reuses the process's :data:`TLS` context instead of making one on the call's event loop.
    """
    return AsyncAnthropic(
        api_key=settings.anthropic_api_key,
        base_url=settings.anthropic_url,
        max_retries=0,
        timeout=30.0,
        http_client=DefaultAsyncHttpxClient(verify=TLS, timeout=30.0),
    )


def _given(**kwargs: Any) -> dict[str, Any]:
    return {k: v for k, v in kwargs.items() if v is not None}


def voice(
    settings: WorkerSettings, voice_id: str | None = None, language: str | None = None
) -> cartesia.TTS:
    """Cartesia at its configured base URL (the sentence job's only plugin), speaking with
    ``voice_id`` in ``language`` (None: the plugin's own)."""
    return cartesia.TTS(
        **_given(
            base_url=settings.cartesia_url,
            api_key=settings.cartesia_api_key,
            voice=voice_id,
            language=language,
        )
    )


def session_for(
    settings: WorkerSettings, vad: Any, client: AsyncAnthropic, agent: CallAgent
) -> AgentSession[Any]:
    """The call's pipeline, each vendor at its configured base URL, on ``agent``'s model, voice
    and language.

    An interruption that brings no words resumes the agent's speech where it paused
    (livekit-agents' ``resume_false_interruption``) only where the audio output can pause: RoomIO's
    can; the lab room's cannot (``pinecall_labroom.agents.LabAudioOutput``), so under the stand-in
    the option is off and an interruption stops the speech, as livekit-agents 1.8.9 does anyway
    there after warning on every call that it ignores the option (``agent_session.py`` L1206).
    """
    return AgentSession(
        vad=vad,
        stt=deepgram.STT(
            **_given(
                base_url=settings.deepgram_url,
                api_key=settings.deepgram_api_key,
                language=agent.language,
            )
        ),
        llm=anthropic.LLM(
            model=agent.model, client=client, **_given(api_key=settings.anthropic_api_key)
        ),
        # the end of a turn by silero's VAD: chosen, not the auto-selected turn-detector model,
        # which runs a model per turn and waited 0.58 s or 2.5 s at random in the lab
        turn_handling={
            "turn_detection": "vad",
            "interruption": {"resume_false_interruption": not settings.lab_rooms},
        },
        tts=voice(settings, agent.voice, agent.language),
    )
