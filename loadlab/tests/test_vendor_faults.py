"""Acceptance 3: every injected fault surfaces through the real plugin — its retries run (counted
at the fake), and a permanent failure raises the plugin's own error type.

Connection options are `FAST` (2 retries, 50 ms apart, 1 s timeout), so stalls end in a second.
"""

from __future__ import annotations

import asyncio
import logging

import pytest
from livekit import rtc
from livekit.agents import (
    APIConnectionError,
    APIError,
    APIStatusError,
    APITimeoutError,
    llm,
    stt,
)

from pinecall_labroom import FRAME_SAMPLES, SAMPLE_RATE
from pinecall_loadlab.callers import LINES, frames, line_pcm, silence
from pinecall_loadlab.vendors import Fault, VendorFakes
from pinecall_loadlab.vendors.anthropic import DEFAULT_REPLY
from pinecall_loadlab.vendors.testing import FAST, LabPlugins


def speak(stream: stt.SpeechStream, line: str) -> None:
    for pcm in frames(line_pcm(line)) + silence(1.0):
        stream.push_frame(rtc.AudioFrame(pcm, SAMPLE_RATE, 1, FRAME_SAMPLES))


async def finals(stream: stt.SpeechStream, n: int = 1) -> list[str]:
    out: list[str] = []
    async for ev in stream:
        if ev.type == stt.SpeechEventType.FINAL_TRANSCRIPT:
            out.append(ev.alternatives[0].text)
            if len(out) == n:
                break
    return out


async def reply(plugins: LabPlugins) -> str:
    ctx = llm.ChatContext()
    ctx.add_message(role="user", content=LINES["question"])
    async with plugins.llm.chat(chat_ctx=ctx, conn_options=FAST) as stream:
        return "".join([c.delta.content async for c in stream if c.delta and c.delta.content])


async def speech_seconds(plugins: LabPlugins, text: str = "Your order arrives Thursday.") -> float:
    stream = plugins.tts.stream(conn_options=FAST)
    stream.push_text(text)
    stream.end_input()
    try:
        return sum([ev.frame.duration async for ev in stream])
    finally:
        await stream.aclose()


# -- Deepgram ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fault",
    [Fault(kind="status", status=503), Fault(kind="status", status=429), Fault(kind="stall")],
)
async def test_deepgram_retries_refused_and_stalled_handshakes(
    vendor_fakes: VendorFakes, lab_plugins: LabPlugins, fault: Fault
) -> None:
    vendor_fakes.deepgram.state.inject(fault, fault)
    vendor_fakes.deepgram.script(LINES["yes"])
    stream = lab_plugins.stt.stream(conn_options=FAST)
    speak(stream, "yes")
    async with asyncio.timeout(20):
        assert await finals(stream) == [LINES["yes"]]
    await stream.aclose()
    assert vendor_fakes.deepgram.state.attempts == 3


async def test_deepgram_gives_up_after_its_retries(
    vendor_fakes: VendorFakes, lab_plugins: LabPlugins
) -> None:
    fault = Fault(kind="status", status=500)
    vendor_fakes.deepgram.state.inject(fault, fault, fault)
    stream = lab_plugins.stt.stream(conn_options=FAST)
    speak(stream, "yes")
    with pytest.raises(APIConnectionError) as err:
        async with asyncio.timeout(20):
            await finals(stream)
    assert isinstance(err.value.__cause__, APIStatusError)
    assert vendor_fakes.deepgram.state.attempts == 3
    await stream.aclose()


async def test_deepgram_stalled_handshakes_never_exhaust_the_retries(
    vendor_fakes: VendorFakes, lab_plugins: LabPlugins
) -> None:
    """A finding, not a wish: an attempt that lasted longer than the connect timeout counts as
    one that had connected, so the budget starts over (livekit-agents 1.8.9 ``stt/stt.py``
    L487-491) — and a handshake that stalls always lasts that long. Five stalls with
    ``max_retry=2``: the stream keeps trying and hears on the sixth; a Deepgram that stalls for
    good leaves the caller unheard, with no error raised."""
    stall = Fault(kind="stall")
    vendor_fakes.deepgram.state.inject(*[stall] * 5)
    vendor_fakes.deepgram.script(LINES["yes"])
    stream = lab_plugins.stt.stream(conn_options=FAST)
    speak(stream, "yes")
    async with asyncio.timeout(30):
        assert await finals(stream) == [LINES["yes"]]
    await stream.aclose()
    assert vendor_fakes.deepgram.state.attempts == 6


async def test_deepgram_refusal_of_the_key_is_not_retried(
    vendor_fakes: VendorFakes, lab_plugins: LabPlugins
) -> None:
    vendor_fakes.deepgram.state.inject(Fault(kind="status", status=401))
    stream = lab_plugins.stt.stream(conn_options=FAST)
    speak(stream, "yes")
    with pytest.raises(APIStatusError) as err:
        async with asyncio.timeout(20):
            await finals(stream)
    assert err.value.status_code == 401
    assert vendor_fakes.deepgram.state.attempts == 1
    await stream.aclose()


async def test_deepgram_reconnects_after_a_dropped_connection(
    vendor_fakes: VendorFakes, lab_plugins: LabPlugins
) -> None:
    """Cut after the first interim: the plugin reconnects and hears what is said next."""
    dg = vendor_fakes.deepgram
    dg.state.inject(Fault(kind="drop", after=1))
    dg.script(LINES["question"], LINES["yes"])
    errors: list[stt.STTError] = []
    lab_plugins.stt.on("error", errors.append)
    stream = lab_plugins.stt.stream(conn_options=FAST)
    speak(stream, "question")
    async with asyncio.timeout(20):
        await dg.state.wait_attempts(2)
        speak(stream, "yes")
        assert await finals(stream) == [LINES["yes"]]
    await stream.aclose()
    assert [e.recoverable for e in errors] == [True]


async def test_deepgram_malformed_message_is_logged_and_skipped(
    vendor_fakes: VendorFakes, lab_plugins: LabPlugins, caplog: pytest.LogCaptureFixture
) -> None:
    """The plugin logs a message it cannot parse and reads on (stt.py L690-693)."""
    vendor_fakes.deepgram.state.inject(Fault(kind="malformed", after=0))
    vendor_fakes.deepgram.script(LINES["question"])
    stream = lab_plugins.stt.stream(conn_options=FAST)
    speak(stream, "question")
    with caplog.at_level(logging.ERROR, logger="livekit.plugins.deepgram"):
        async with asyncio.timeout(20):
            assert await finals(stream) == [LINES["question"]]
    await stream.aclose()
    assert "failed to process deepgram message" in caplog.text
    assert vendor_fakes.deepgram.state.attempts == 1


# -- Anthropic -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fault",
    [
        Fault(kind="status", status=500),
        Fault(kind="status", status=529),
        Fault(kind="status", status=429),
        Fault(kind="stall"),
        Fault(kind="drop", after=0),
        Fault(kind="malformed", after=0),
        Fault(kind="error_event", after=0),
    ],
)
async def test_anthropic_retries_until_a_reply(
    vendor_fakes: VendorFakes, lab_plugins: LabPlugins, fault: Fault
) -> None:
    vendor_fakes.anthropic.state.inject(fault, fault)
    async with asyncio.timeout(20):
        assert await reply(lab_plugins) == DEFAULT_REPLY
    assert vendor_fakes.anthropic.state.attempts == 3


@pytest.mark.parametrize(
    ("fault", "cause"),
    [
        (Fault(kind="status", status=529), APIStatusError),
        # the SDK's read timeout fires inside the event stream, where the plugin wraps whatever
        # is raised as a connection error (llm.py L373-384), not APITimeoutError
        (Fault(kind="stall"), APIConnectionError),
        (Fault(kind="malformed", after=0), APIConnectionError),
    ],
)
async def test_anthropic_gives_up_after_its_retries(
    vendor_fakes: VendorFakes, lab_plugins: LabPlugins, fault: Fault, cause: type[APIError]
) -> None:
    vendor_fakes.anthropic.state.inject(fault, fault, fault)
    with pytest.raises(APIConnectionError, match="after 3 attempts") as err:
        async with asyncio.timeout(20):
            await reply(lab_plugins)
    assert isinstance(err.value.__cause__, cause)
    assert vendor_fakes.anthropic.state.attempts == 3


async def test_anthropic_does_not_retry_a_bad_request_or_a_reply_cut_midway(
    vendor_fakes: VendorFakes, lab_plugins: LabPlugins
) -> None:
    state = vendor_fakes.anthropic.state
    state.inject(Fault(kind="status", status=400))
    with pytest.raises(APIStatusError) as err:
        await reply(lab_plugins)
    assert (err.value.status_code, state.attempts) == (400, 1)
    # text already streamed: the plugin marks the error not retryable (llm.py L385-397)
    state.inject(Fault(kind="drop", after=3))
    with pytest.raises(APIConnectionError) as cut:
        await reply(lab_plugins)
    assert not cut.value.retryable
    assert state.attempts == 2


# -- Cartesia ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fault",
    [
        Fault(kind="status", status=503),
        Fault(kind="status", status=429),
        Fault(kind="stall"),
        Fault(kind="drop", after=0),
        Fault(kind="malformed", after=0),
        Fault(kind="error_event", after=0, status=500),
    ],
)
async def test_cartesia_retries_until_audio(
    vendor_fakes: VendorFakes, lab_plugins: LabPlugins, fault: Fault
) -> None:
    vendor_fakes.cartesia.state.inject(fault, fault)
    async with asyncio.timeout(20):
        assert await speech_seconds(lab_plugins) > 1.0
    assert vendor_fakes.cartesia.state.attempts == 3


@pytest.mark.parametrize(
    ("fault", "error"),
    [
        (Fault(kind="status", status=503), APIStatusError),
        (Fault(kind="stall"), APITimeoutError),
        (Fault(kind="malformed", after=0), APIConnectionError),
        # the plugin reads an error event's ``done: true`` before its ``type`` (tts.py L520-523
        # vs L556-561), so the context just ends with no audio, and the framework raises the base
        # APIError "no audio frames were pushed" — exactly that type, no subclass
        (Fault(kind="error_event", after=0), APIError),
    ],
)
async def test_cartesia_gives_up_after_its_retries(
    vendor_fakes: VendorFakes, lab_plugins: LabPlugins, fault: Fault, error: type[APIError]
) -> None:
    vendor_fakes.cartesia.state.inject(fault, fault, fault)
    with pytest.raises(error) as err:
        async with asyncio.timeout(20):
            await speech_seconds(lab_plugins)
    assert type(err.value) is error
    if fault.kind == "error_event":
        assert "no audio frames were pushed" in err.value.message
    assert vendor_fakes.cartesia.state.attempts == 3


async def bytes_seconds(plugins: LabPlugins, text: str = "Your order arrives Thursday.") -> float:
    """Synthesize through ``POST /tts/bytes`` (the plugin's ChunkedStream)."""
    async with plugins.tts.synthesize(text, conn_options=FAST) as stream:
        return sum([ev.frame.duration async for ev in stream])


@pytest.mark.parametrize(
    "fault", [Fault(kind="status", status=503), Fault(kind="status", status=429)]
)
async def test_cartesia_bytes_retries_until_audio(
    vendor_fakes: VendorFakes, lab_plugins: LabPlugins, fault: Fault
) -> None:
    vendor_fakes.cartesia.state.inject(fault, fault)
    async with asyncio.timeout(20):
        assert await bytes_seconds(lab_plugins) > 1.0
    assert vendor_fakes.cartesia.state.attempts == 3
    assert vendor_fakes.cartesia.state.faults_applied == [fault, fault]


async def test_cartesia_bytes_gives_up_after_its_retries(
    vendor_fakes: VendorFakes, lab_plugins: LabPlugins
) -> None:
    """The ChunkedStream re-raises the last attempt's own error (not wrapped)."""
    fault = Fault(kind="status", status=503)
    vendor_fakes.cartesia.state.inject(fault, fault, fault)
    with pytest.raises(APIStatusError) as err:
        async with asyncio.timeout(20):
            await bytes_seconds(lab_plugins)
    assert err.value.status_code == 503
    assert vendor_fakes.cartesia.state.attempts == 3


async def test_cartesia_does_not_retry_once_audio_was_sent(
    vendor_fakes: VendorFakes, lab_plugins: LabPlugins
) -> None:
    """Partial audio reached the caller: the plugin fails rather than repeat it
    (tts.py L641-660)."""
    vendor_fakes.cartesia.state.inject(Fault(kind="drop", after=2))
    with pytest.raises(APIStatusError):
        async with asyncio.timeout(20):
            await speech_seconds(lab_plugins)
    assert vendor_fakes.cartesia.state.attempts == 1
