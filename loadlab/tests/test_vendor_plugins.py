"""Acceptance 1: each real plugin, unmodified, against its fake on the vendor's own wire."""

from __future__ import annotations

import asyncio

import aiohttp
from livekit import rtc
from livekit.agents import llm, stt
from livekit.agents.llm import function_tool
from livekit.plugins import deepgram

from pinecall_labroom import FRAME_SAMPLES, SAMPLE_RATE
from pinecall_loadlab.callers import LINES, frames, line_pcm, silence
from pinecall_loadlab.vendors import Reply, ToolUse, VendorFakes
from pinecall_loadlab.vendors.anthropic import DEFAULT_REPLY
from pinecall_loadlab.vendors.cartesia import duration_of
from pinecall_loadlab.vendors.testing import LabPlugins


def audio_frames(pcm_frames: list[bytes]) -> list[rtc.AudioFrame]:
    return [rtc.AudioFrame(f, SAMPLE_RATE, 1, FRAME_SAMPLES) for f in pcm_frames]


async def test_deepgram_plugin_hears_interim_and_final_transcripts(
    vendor_fakes: VendorFakes, lab_plugins: LabPlugins
) -> None:
    plugins = lab_plugins
    vendor_fakes.deepgram.script(LINES["question"], tag="lab")
    stream = plugins.stt.stream()
    for frame in audio_frames(frames(line_pcm("question")) + silence(1.0)):
        stream.push_frame(frame)
    seen: list[stt.SpeechEvent] = []
    async with asyncio.timeout(20):
        async for event in stream:
            seen.append(event)
            if event.type == stt.SpeechEventType.END_OF_SPEECH:
                break
    await stream.aclose()
    kinds = [e.type for e in seen if e.type != stt.SpeechEventType.RECOGNITION_USAGE]
    assert kinds[0] == stt.SpeechEventType.START_OF_SPEECH
    assert stt.SpeechEventType.INTERIM_TRANSCRIPT in kinds
    assert kinds[-2:] == [stt.SpeechEventType.FINAL_TRANSCRIPT, stt.SpeechEventType.END_OF_SPEECH]
    final = next(e for e in seen if e.type == stt.SpeechEventType.FINAL_TRANSCRIPT)
    assert final.alternatives[0].text == LINES["question"]
    interim = next(e for e in seen if e.type == stt.SpeechEventType.INTERIM_TRANSCRIPT)
    assert LINES["question"].startswith(interim.alternatives[0].text)
    query = vendor_fakes.deepgram.opened[0]
    assert (query["encoding"], query["sample_rate"], query["tag"]) == ("linear16", "16000", "lab")
    assert query["interim_results"] == "true"


async def test_anthropic_plugin_streams_a_reply_with_usage(
    vendor_fakes: VendorFakes, lab_plugins: LabPlugins
) -> None:
    plugins = lab_plugins
    ctx = llm.ChatContext()
    ctx.add_message(role="system", content="You are a helpful shop assistant.")
    ctx.add_message(role="user", content=LINES["question"])
    chunks = []
    async with asyncio.timeout(20), plugins.llm.chat(chat_ctx=ctx) as stream:
        chunks = [chunk async for chunk in stream]
    text = "".join(c.delta.content for c in chunks if c.delta and c.delta.content)
    assert text == DEFAULT_REPLY
    assert sum(1 for c in chunks if c.delta and c.delta.content) > 5  # streamed, not one piece
    usage = [c.usage for c in chunks if c.usage]
    assert usage
    assert usage[-1].completion_tokens > 0
    assert usage[-1].prompt_tokens > 0
    [request] = vendor_fakes.anthropic.requests
    assert request["stream"] is True
    assert request["model"] == "claude-haiku-4-5"
    assert request["system"][0]["text"] == "You are a helpful shop assistant."


@function_tool
async def lookup_order(order_id: str) -> str:
    """Look up an order's delivery date.

    Args:
        order_id: the order's id
    """
    return "Thursday"


async def test_anthropic_plugin_calls_a_scripted_tool(
    vendor_fakes: VendorFakes, lab_plugins: LabPlugins
) -> None:
    plugins = lab_plugins
    vendor_fakes.anthropic.script(
        Reply(text="Let me check.", tool=ToolUse(name="lookup_order", input={"order_id": "A17"}))
    )
    ctx = llm.ChatContext()
    ctx.add_message(role="user", content=LINES["question"])
    async with asyncio.timeout(20), plugins.llm.chat(chat_ctx=ctx, tools=[lookup_order]) as s:
        chunks = [chunk async for chunk in s]
    calls = [t for c in chunks if c.delta and c.delta.tool_calls for t in c.delta.tool_calls]
    assert [(t.name, t.arguments) for t in calls] == [("lookup_order", '{"order_id": "A17"}')]
    assert vendor_fakes.anthropic.requests[0]["tools"][0]["name"] == "lookup_order"


async def test_cartesia_plugin_streams_audio_as_long_as_the_text(
    vendor_fakes: VendorFakes, lab_plugins: LabPlugins
) -> None:
    plugins = lab_plugins
    sentences = ["Your order left this morning.", "It arrives on Thursday."]
    stream = plugins.tts.stream()
    stream.push_text(" ".join(sentences))
    stream.end_input()
    async with asyncio.timeout(20):
        audio = [ev.frame async for ev in stream]
    await stream.aclose()
    cfg = vendor_fakes.cartesia.state.config
    expected = sum(duration_of(s, cfg) for s in sentences)
    got = sum(f.duration for f in audio)
    assert abs(got - expected) < 0.05, (got, expected)
    assert {f.sample_rate for f in audio} == {24000}
    assert vendor_fakes.cartesia.transcripts[-1] == " "  # the plugin's end of context
    [context] = vendor_fakes.cartesia.contexts  # one context, asking the plugin's voice
    assert context["voice"] == {"mode": "id", "id": plugins.tts._opts.voice}
    assert context["transcript"].startswith(sentences[0])


async def test_cartesia_plugin_bytes_endpoint(
    vendor_fakes: VendorFakes, lab_plugins: LabPlugins
) -> None:
    plugins = lab_plugins
    text = "Thank you for calling."
    async with asyncio.timeout(20):
        audio = await plugins.tts.synthesize(text).collect()
    expected = duration_of(text, vendor_fakes.cartesia.state.config)
    assert abs(audio.duration - expected) < 0.05


async def test_deepgram_plugin_finalizes_and_closes_with_utterance_end(
    vendor_fakes: VendorFakes, http_session: aiohttp.ClientSession
) -> None:
    """The control messages and the utterance end: Finalize on the flush that ends input, then
    CloseStream (KeepAlive runs on a task of its own, so its place varies); UtteranceEnd once
    `utterance_end_ms` of quiet follows the words."""
    plugin = deepgram.STT(
        base_url=vendor_fakes.deepgram_url,
        api_key="lab",
        http_session=http_session,
        utterance_end_ms=1000,
    )
    vendor_fakes.deepgram.script(LINES["yes"])
    stream = plugin.stream()
    for frame in audio_frames(frames(line_pcm("yes")) + silence(1.5)):
        stream.push_frame(frame)
    stream.end_input()
    async with asyncio.timeout(20):
        events = [e.type async for e in stream]
    assert stt.SpeechEventType.FINAL_TRANSCRIPT in events
    dg = vendor_fakes.deepgram
    assert [c for c in dg.control if c != "KeepAlive"] == ["Finalize", "CloseStream"]
    assert dg.sent[0] == "SpeechStarted"
    assert dg.sent[-2:] == ["UtteranceEnd", "Metadata"]
    assert dg.opened[0]["utterance_end_ms"] == "1000"
