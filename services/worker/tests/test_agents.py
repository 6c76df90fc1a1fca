"""A call runs the agent its org defined (issue 16, acceptance 1; "The worker runs the call's
agent"): the real worker against the LiveKit stand-in and the vendor fakes, a real call-log
replica process holding the agents' definitions, and an app process on the app socket answering
their tools and steering their calls.

Two agents of one environment, with their own prompts, voices and tools, each take a call: each
call's log names its agent's prompt hash and its tools, the model fake was asked with that prompt
and those tools, the voice fake with that voice. Then what steers a call from outside its model: a
tool nobody answers times out into an error the model speaks around, the app's ``say`` is spoken
and its ``end`` ends the call ``completed``, and a call at its agent's ``max_call_seconds`` says
its last sentence and ends ``timeout``.

One worker, call-log and app take the four calls, one after another (the model fake answers from
one queue): a worker's start is most of a test's time.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import msgspec
import pytest
from livekit import api

from pinecall_contracts.agents import AgentDefinition, AgentTool
from pinecall_labroom import LabRoom
from pinecall_loadlab.callers import LINES, HangUp, Say, WaitForAgent, play
from pinecall_loadlab.vendors import Reply, ToolUse, VendorFakes
from pinecall_testkit.appsocket import App, app
from pinecall_testkit.call_log import Process
from pinecall_testkit.roster import Keys, bearer
from pinecall_testkit.worker import CallEvents, of_kind, offer_call, read_log, serving
from pinecall_worker.server import Worker

pytestmark = pytest.mark.long  # scheduled first (the testing plugin)

DAY = {"type": "object", "properties": {"day": {"type": "string"}}, "required": ["day"]}
BOOKING = AgentDefinition(
    name="booking",
    prompt="You book tables at Acme's bistro. Ask the day, then book it.",
    greeting="Acme's bistro, booking desk.",
    voice="voice-booking",
    tools=[AgentTool(name="book_table", description="Book a table.", parameters=DAY)],
)
BILLING = AgentDefinition(
    name="billing",
    prompt="You answer questions about Acme's invoices, briefly.",
    voice="voice-billing",
    tools=[AgentTool(name="find_invoice", description="Find an invoice.", timeout_s=20)],
)
STOCK = AgentDefinition(
    name="stock",
    prompt="You tell callers what Acme has in stock.",
    tools=[AgentTool(name="check_stock", description="Check the stock.", timeout_s=1)],
)
BRIEF = AgentDefinition(name="brief", prompt="You keep calls short.", max_call_seconds=2)
ANSWERS = {"book_table": {"booked": "Thursday, 19:00"}, "find_invoice": "Invoice A17 is paid."}
"""What the app answers each tool it is asked."""
TURN = [Say(line="question"), WaitForAgent(until_quiet_s=1.0)]


async def define(call_log: Process, keys: Keys, *agents: AgentDefinition) -> None:
    async with httpx.AsyncClient(base_url=call_log.url, timeout=30) as http:
        for agent in agents:
            put = await http.put(
                f"/v1/agents/{agent.name}",
                content=msgspec.json.encode(agent),
                params={"org": "org_acme"},
                headers=bearer(keys.app) | {"content-type": "application/json"},
            )
            assert put.status_code == 200, put.text


class Holder:
    """An app process holding agents: answers each tool call from :data:`ANSWERS` (none, for a
    tool not there), keeps every frame it hears."""

    def __init__(self, socket: App) -> None:
        self.socket = socket
        self.frames: list[dict[str, Any]] = []
        self.heard = asyncio.Event()

    async def listen(self) -> None:
        while True:
            frame = json.loads(await self.socket.ws.recv())
            self.frames.append(frame)
            self.heard.set()
            if frame["type"] == "tool.call.v1" and frame["name"] in ANSWERS:
                await self.socket.send(
                    "tool.result.v1",
                    call=frame["call"],
                    id=frame["id"],
                    result=ANSWERS[frame["name"]],
                )

    async def command(self, call: str, id: str, kind: str, text: str) -> None:
        """Send a command and wait for its ack."""
        await self.socket.send("call.command.v1", call=call, id=id, kind=kind, text=text)
        while not any(f["type"] == "call.command.ack.v1" and f["id"] == id for f in self.frames):
            self.heard.clear()
            await self.heard.wait()

    def of(self, kind: str, call: str) -> list[dict[str, Any]]:
        return [f for f in self.frames if f["type"] == kind and f.get("call") == call]


@contextlib.asynccontextmanager
async def holding(call_log: Process, keys: Keys, *agents: str) -> AsyncIterator[Holder]:
    async with app(call_log, keys) as socket:
        for agent in agents:
            await socket.register(agent)
        holder = Holder(socket)
        listening = asyncio.create_task(holder.listen())
        try:
            yield holder
        finally:
            listening.cancel()
            await asyncio.gather(listening, return_exceptions=True)


def system_of(request: dict[str, Any]) -> str:
    """The system prompt a Messages API request carries (the plugin sends it as text blocks)."""
    system = request.get("system", "")
    return system if isinstance(system, str) else "".join(b["text"] for b in system)


def asked(requests: list[dict[str, Any]]) -> set[tuple[str, frozenset[str]]]:
    """Each request's (system prompt, tool names)."""
    return {(system_of(r), frozenset(t["name"] for t in r.get("tools", []))) for r in requests}


def tool_results(request: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``tool_result`` blocks of a Messages API request: what the model was told."""
    return [
        block
        for message in request["messages"]
        for block in message["content"]
        if isinstance(block, dict) and block.get("type") == "tool_result"
    ]


def voices(contexts: list[dict[str, Any]]) -> set[str]:
    return {c["voice"]["id"] for c in contexts}


def digest(agent: AgentDefinition) -> str:
    return hashlib.sha256(agent.prompt.encode()).hexdigest()


async def test_each_call_runs_its_agent_and_its_app_steers_it(
    call_worker: Callable[..., Worker],
    caller: Callable[[str], Awaitable[LabRoom]],
    livekit_api: api.LiveKitAPI,
    vendor_fakes: VendorFakes,
    keys: Keys,
    call_log: Process,
    call_events: CallEvents,
) -> None:
    await define(call_log, keys, BOOKING, BILLING, STOCK, BRIEF)
    farewell = "Thank you for calling the booking desk."
    sorry = "Sorry, I cannot check the stock right now."
    said = "Your order number is 42."
    vendor_fakes.deepgram.script(*[LINES["question"]] * 3)
    vendor_fakes.anthropic.script(
        Reply(tool=ToolUse(name="book_table", input={"day": "Thursday"})),
        Reply(text="Your table is booked for Thursday at seven."),
        Reply(tool=ToolUse(name="find_invoice")),
        Reply(text="Invoice A17 is paid."),
        Reply(tool=ToolUse(name="check_stock", input={"item": "vase"})),
        Reply(text=sorry),
    )
    models, voiced = vendor_fakes.anthropic.requests, vendor_fakes.cartesia.contexts
    worker = call_worker()
    async with serving(worker), holding(call_log, keys, "booking", "billing", "stock") as holder:
        async with asyncio.timeout(240):
            # booking greets first; the app ends the call once its table is booked
            first = await caller("call-booking")
            await offer_call(
                livekit_api, worker.name, room="call-booking", call="call_booking", agent="booking"
            )
            greeted = await play(first, [WaitForAgent(until_quiet_s=1.0), *TURN])
            await holder.command("call_booking", "cmd_end", "end", farewell)
            booked = await call_events.wait("sealed", "call_booking")
            await first.closed.wait()  # the worker hung the caller up
            after_booking = len(models), len(voiced)
            # billing waits for its caller; the caller hangs up once answered
            room = await caller("call-billing")
            await offer_call(
                livekit_api, worker.name, room="call-billing", call="call_billing", agent="billing"
            )
            await play(room, [*TURN, HangUp()])
            billed = await call_events.wait("sealed", "call_billing")
            after_billing = len(models), len(voiced)
            # the app holds the stock call but never answers its tool: the model hears the
            # time-out and the call goes on; then the app has the agent say a sentence
            room = await caller("call-stock")
            await offer_call(
                livekit_api, worker.name, room="call-stock", call="call_stock", agent="stock"
            )
            await play(room, TURN)
            await holder.command("call_stock", "cmd_say", "say", said)
            heard = await play(room, [WaitForAgent(until_quiet_s=1.0), HangUp()])
            stocked = await call_events.wait("sealed", "call_stock")
            after_stock = len(models)
            # a call of two seconds at most
            await caller("call-brief")
            await offer_call(
                livekit_api, worker.name, room="call-brief", call="call_brief", agent="brief"
            )
            brief = await call_events.wait("sealed", "call_brief")

    # each call ran its own agent: its prompt's hash and version on the log, its tools asked of
    # the app, the vendors asked for its prompt, its tools and its voice
    assert greeted.agent_heard[0] < greeted.said[0][1]  # the greeting came before the question
    assert (booked.outcome, billed.outcome) == ("completed", "caller_hangup")
    assert first.removed_reason == "ROOM_DELETED"
    for call, agent, tool in [
        ("call_booking", BOOKING, "book_table"),
        ("call_billing", BILLING, "find_invoice"),
    ]:
        log = await read_log(call_log.url, keys.production, call)
        started = of_kind(log, "call.started")[0]
        assert (started["prompt_hash"], started["version"]) == (digest(agent), 1)
        assert [(t["name"], t["error"]) for t in of_kind(log, "turn.tool")] == [(tool, False)]
        assert [r["result"] for r in of_kind(log, "tool.result")] == [ANSWERS[tool]]
        assert [a["agent"] for a in holder.of("call.attached.v1", call)] == [agent.name]
    booking = await read_log(call_log.url, keys.production, "call_booking")
    assert [t["text"] for t in of_kind(booking, "turn.agent")] == [
        BOOKING.greeting,
        "Your table is booked for Thursday at seven.",
        farewell,
    ]
    assert [c["id"] for c in of_kind(booking, "call.command")] == ["cmd_end"]
    assert of_kind(booking, "call.ended")[0]["reason"] == "the app ended the call"
    assert asked(models[: after_booking[0]]) == {
        (BOOKING.prompt, frozenset({"book_table", "end_call"}))
    }
    assert asked(models[after_booking[0] : after_billing[0]]) == {
        (BILLING.prompt, frozenset({"find_invoice", "end_call"}))
    }
    [told] = tool_results(models[after_booking[0] - 1])  # the app's answer, as the model had it
    assert (json.loads(told["content"]), told["is_error"]) == (ANSWERS["book_table"], False)
    assert voices(voiced[: after_booking[1]]) == {"voice-booking"}
    assert voices(voiced[after_booking[1] : after_billing[1]]) == {"voice-billing"}

    # the tool nobody answered timed out once; the model was told, and spoke around it
    assert (stocked.outcome, bool(heard.agent_heard)) == ("caller_hangup", True)
    log = await read_log(call_log.url, keys.production, "call_stock")
    assert [r["error"] for r in of_kind(log, "tool.result")] == ["timeout"]
    assert [(t["name"], t["error"]) for t in of_kind(log, "turn.tool")] == [("check_stock", True)]
    assert holder.of("tool.call.v1", "call_stock")  # the app was asked, and said nothing
    [failed] = tool_results(models[after_stock - 1])
    assert failed["is_error"] is True
    assert "check_stock gave no answer within 1 seconds" in failed["content"]
    # the app's say, spoken after it (the caller heard it)
    assert [t["text"] for t in of_kind(log, "turn.agent")] == [sorry, said]
    assert [c["id"] for c in of_kind(log, "call.command")] == ["cmd_say"]

    # the limit: its last sentence, then the end
    assert brief.outcome == "timeout"
    log = await read_log(call_log.url, keys.production, "call_brief")
    assert [t["text"] for t in of_kind(log, "turn.agent")] == [worker.settings.limit_says]
    assert "max_call_seconds" in of_kind(log, "call.ended")[0]["reason"]
    spoken = " ".join(" ".join(vendor_fakes.cartesia.transcripts).split())  # sentence by sentence
    assert worker.settings.limit_says in spoken
