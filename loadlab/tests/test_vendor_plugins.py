"""Acceptance 1: each real plugin, unmodified, against its fake on the vendor's own wire."""

from __future__ import annotations

import asyncio
import json

import aiohttp
from livekit import rtc
from livekit.agents import llm, stt
from livekit.agents.llm import FunctionCall, FunctionCallOutput, function_tool
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


BOOK = {
    "name": "book_table",
    "description": "Book a table.",
    "parameters": {
        "type": "object",
        "properties": {
            "time": {"type": "string", "examples": ["19:00"]},
            "party": {"type": "integer", "minimum": 1},
            "note": {"type": "string"},
        },
        "required": ["time", "party"],
    },
}


@function_tool(raw_schema=BOOK)
async def book_table(raw_arguments: dict[str, object]) -> str:
    return "booked"


@function_tool
async def hang_up() -> str:
    """End the call (takes no arguments: the fake never asks it on its own)."""
    return "bye"


async def _turn(
    plugins: LabPlugins, ctx: llm.ChatContext
) -> tuple[str, list[llm.FunctionToolCall]]:
    async with (
        asyncio.timeout(20),
        plugins.llm.chat(chat_ctx=ctx, tools=[book_table, hang_up]) as s,
    ):
        chunks = [chunk async for chunk in s]
    text = "".join(c.delta.content for c in chunks if c.delta and c.delta.content)
    return text, [t for c in chunks if c.delta and c.delta.tool_calls for t in c.delta.tool_calls]


async def test_anthropic_plugin_is_asked_a_tool_on_a_share_of_turns_and_says_its_answer(
    vendor_fakes: VendorFakes, lab_plugins: LabPlugins
) -> None:
    """Unscripted, with a share of 0.5: the first turn asks the tool that takes arguments (its
    arguments from the schema: the example, the minimum; the optional one left out), the request
    with its result is answered by saying it, the next turn is an answer, the third asks again."""
    vendor_fakes.anthropic.state.configure(tool_share=0.5)
    ctx = llm.ChatContext()
    ctx.add_message(role="user", content=LINES["question"])
    text, [asked] = await _turn(lab_plugins, ctx)
    assert (text, asked.name, json.loads(asked.arguments)) == (
        "",
        "book_table",
        {"time": "19:00", "party": 1},
    )
    ctx.insert(FunctionCall(call_id=asked.call_id, name=asked.name, arguments=asked.arguments))
    ctx.insert(
        FunctionCallOutput(call_id=asked.call_id, name=asked.name, output='{"ref": "BK-1"}',
                           is_error=False)
    )  # fmt: skip
    said, again = await _turn(lab_plugins, ctx)
    assert (said, again) == ('Here it is: {"ref": "BK-1"}', [])
    ctx.add_message(role="assistant", content=said)
    ctx.add_message(role="user", content=LINES["yes"])
    assert await _turn(lab_plugins, ctx) == (DEFAULT_REPLY, [])
    ctx.add_message(role="assistant", content=DEFAULT_REPLY)
    ctx.add_message(role="user", content=LINES["goodbye"])
    _, [third] = await _turn(lab_plugins, ctx)
    assert third.name == "book_table"
    assert vendor_fakes.anthropic.turns.asked == ["book_table", "book_table"]


async def test_a_tool_that_failed_is_said_as_a_failure(
    vendor_fakes: VendorFakes, lab_plugins: LabPlugins
) -> None:
    ctx = llm.ChatContext()
    ctx.add_message(role="user", content=LINES["question"])
    ctx.insert(FunctionCall(call_id="toolu_1", name="book_table", arguments="{}"))
    ctx.insert(
        FunctionCallOutput(call_id="toolu_1", name="book_table", output="No table at 19:00.",
                           is_error=True)
    )  # fmt: skip
    assert await _turn(lab_plugins, ctx) == ("Sorry, that did not work: No table at 19:00.", [])


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
