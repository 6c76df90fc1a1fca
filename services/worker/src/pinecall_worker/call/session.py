"""The call's pipeline: silero, Deepgram, Anthropic (Haiku) and Cartesia, each at its base URL.

The vendor plugins are imported here, at the top, and the worker imports this module before it
registers, so livekit-agents' forkserver preloads them once and every call's process inherits
them (seed 000, "Capacity is counted in calls": 3–5 s a call before, 0.1 s after); the worker
names this module to the forkserver too (``server.modules_of``), so what it imports is preloaded.
"""

from __future__ import annotations

from typing import Any

# imported here, not on a job's loop: anyio's asyncio backend at httpx's first request (0.3–2.5
# s), its task module at a job's first cancel scope (144 ms in up), httpcore at httpx's first
# client (0.3–0.5 s), livekit-agents' async toolset as a session starts (125 ms in up)
import anyio._backends._asyncio
import anyio._core._tasks  # noqa: F401
import httpcore  # noqa: F401
import livekit.agents.llm.async_toolset  # noqa: F401
from anthropic import AsyncAnthropic, DefaultAsyncHttpxClient
from livekit.agents import AgentSession, JobProcess
from livekit.agents.utils import http_context
from livekit.plugins import anthropic, cartesia, deepgram, silero

from pinecall_clients.bucket import start_opening
from pinecall_clients.tls import TLS
from pinecall_worker.call.agent import CallAgent
from pinecall_worker.settings import WorkerSettings

# livekit-agents' shared aiohttp session (the vendor plugins') builds its TLS context on its first
# use in each job process, on the call's loop (``utils/http_context.py``, cached per process):
# built here, at import in the forkserver, every job process inherits it instead.
http_context._create_ssl_context()


def _anthropic_schemas() -> object:
    """Build, here in the forkserver, the pydantic schemas the Anthropic SDK (1.17) builds on a
    call's loop the first time each job process needs them: its stream events' union (a
    ``TypeAdapter``, cached per process by ``anthropic._models``) and the model list's page
    class, which livekit-agents' LLM prewarm asks for. ``up --calls 40 --rate 2``
    (2026-12-04): 10 warnings of a job's loop blocked 101–207 ms (14–59 ms of its CPU) in
    pydantic's schema generation, in ``LLM._main_task`` and the prewarm's task; 15 ms of CPU
    here, once. The page class is returned to be kept: pydantic caches a generic's
    parametrization weakly."""
    from anthropic._models import construct_type
    from anthropic.pagination import AsyncPage
    from anthropic.types import ModelInfo, RawMessageStreamEvent

    construct_type(type_=RawMessageStreamEvent, value={"type": "ping"})
    return AsyncPage[ModelInfo]


_ANTHROPIC_PAGE = _anthropic_schemas()


def _pydantic_defaults() -> int:
    """Ask, here in the forkserver, whether each default factory of every pydantic model loaded
    (livekit-agents', the SDKs') takes the validated data: pydantic 2.14 answers it with
    ``inspect.signature`` the first time a field or private attribute is defaulted, and keeps
    the answer on the field (``FieldInfo.default_factory_takes_validated_data``) — so in each job
    process, on the call's loop, as livekit-agents' session starts (for a builtin such as
    ``list``, ``inspect`` parses its text signature). ``up --calls 40 --rate 2`` (2026-12-04): 7
    of 26 job-loop warnings sampled in ``inspect._signature_fromstr``. 8 ms here, once, for
    ~1 900 models; the number of fields and attributes asked is returned."""
    from pydantic import BaseModel

    models, asked = [BaseModel], 0
    while models:
        for model in models.pop().__subclasses__():
            models.append(model)
            for name in ("__private_attributes__", "__pydantic_fields__"):  # none: unbuilt
                held: dict[str, Any] = getattr(model, name, None) or {}
                for attribute in held.values():
                    attribute.default_factory_takes_validated_data  # noqa: B018  (kept on it)
                    asked += 1
    return asked


_pydantic_defaults()


def prewarm(proc: JobProcess) -> None:
    """Load silero's model once per job process, before any call is given to it, and start
    the thread that opens the recording's bucket client (``bucket.start_opening``)."""
    proc.userdata["vad"] = silero.VAD.load()
    start_opening()


def model_client(settings: WorkerSettings) -> AsyncAnthropic:
    """The Anthropic client of one call, owned by the call so it is closed when the call ends.

    livekit-plugins-anthropic 1.8.9 builds a client it never closes (``llm.py`` L137-150); this
    one has the same settings (no SDK retries: livekit-agents retries; 30 s to read) and
    reuses the process's TLS context (:data:`pinecall_clients.tls.TLS`) instead of making one
    on the call's event loop.
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
