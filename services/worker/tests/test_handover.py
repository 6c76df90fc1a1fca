"""A call is its agent's, not a socket's (issue 16, acceptance 2), end to end: two call-log replicas
as processes on real Postgres and NATS, the real worker on replica ``a`` (the LiveKit stand-in, the
vendor fakes, a SIP caller), app processes (``pinecall start``, ``apps/handover.py``) and a console
(``takes_unclaimed: false``) on ``a``.

1. The app process holding the call (``app-1``, on ``a``) is SIGKILLed while the call's tool runs
   in it: ``app-2`` (on ``b``) hears ``call.attached`` then that ``tool.call`` and answers; the
   model is told the answer and the caller hears the agent speak it.
2. The replica holding the socket (``b``, with ``app-2``, holding the next call) is SIGKILLed while
   the tool runs in ``app-2``: ``a`` takes the call back and hands it to ``app-3`` (on ``a``), which
   hears ``call.attached`` then that ``tool.call`` and answers; the caller hears it.

Each time the tool finished once (the app's own count: the runs it says it finished), the log
holds one ``tool.call`` and one ``tool.result``, and the console was handed nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
from livekit import api

from pinecall_contracts.agents import AgentDefinition, AgentTool
from pinecall_contracts.appsocket import Holding
from pinecall_labroom import LabRoom
from pinecall_loadlab.callers import LINES, HangUp, Say, WaitForAgent, play
from pinecall_loadlab.vendors import Reply, ToolUse, VendorFakes
from pinecall_servicekit.bus import Bus
from pinecall_servicekit.changes import Changes
from pinecall_testkit.appsocket import App, dial
from pinecall_testkit.call_log import Process, served
from pinecall_testkit.roster import Keys, bearer
from pinecall_testkit.worker import CallEvents, of_kind, offer_call, read_log, serving
from pinecall_worker.server import Worker

pytestmark = pytest.mark.long  # scheduled first (the testing plugin)

APPS = Path(__file__).parent / "apps"
TAKES = ("production", "org_acme", "booking")
"""What a replica's ``apps.holding`` says when a socket of it takes the agent's calls."""
BOOKING = AgentDefinition(
    name="booking",
    prompt="You book tables at Acme's bistro.",
    tools=[
        AgentTool(
            name="book_table",
            description="Book a table.",
            parameters={
                "type": "object",
                "properties": {"day": {"type": "string"}, "hang": {"type": "string"}},
                "required": ["day"],
            },
            timeout_s=30,
        )
    ],
)
WITHIN_S = 60.0
"""How long a step may take before the test fails (a bound on a failure, never a pace)."""


class Heard:
    """What the test hears as it happens: each replica's last ``apps.holding`` (NATS) and the
    apps' reports (their stdout): the calls attached to them and their tool's runs, as (what,
    instance, call, why or tool call id)."""

    def __init__(self) -> None:
        self.holding: dict[str, set[tuple[str, str, str]]] = {}
        self.runs: list[tuple[str, str, str, str]] = []
        self.changes = Changes()

    async def held(self, holding: Holding) -> None:
        self.holding[holding.replica] = set(holding.agents)
        await self.changes.notify()

    async def read(self, stdout: asyncio.StreamReader) -> None:
        async for line in stdout:
            said = line.decode().split()
            assert len(said) == 4, f"an app said {line!r}, not what instance call about"
            what, instance, call, tool = said
            self.runs.append((what, instance, call, tool))
            await self.changes.notify()

    async def until(self, predicate: Callable[[], bool]) -> None:
        await self.changes.wait_for(predicate, WITHIN_S)

    def takes(self, replica: str) -> bool:
        return TAKES in self.holding.get(replica, set())

    def started(self, instance: str, call: str) -> bool:
        """Whether ``instance`` started running a tool call of ``call``."""
        return any(run[:3] == ("start", instance, call) for run in self.runs)

    def of(self, call: str) -> list[tuple[str, str, str]]:
        """What the apps said of ``call``, as (what, instance, why or tool call id)."""
        return [(what, i, tool) for what, i, c, tool in self.runs if c == call]


@pytest.fixture
async def heard(nats_url: str, nats_namespace: str) -> AsyncIterator[Heard]:
    listening = Heard()
    bus = await Bus.connect(nats_url, nats_namespace, name="handover-test")
    try:
        await bus.subscribe(bus.subjects.apps_holding, Holding, listening.held)
        await bus.client.flush()
        yield listening
    finally:
        await bus.close()


@contextlib.asynccontextmanager
async def app_process(
    replica: Process, keys: Keys, instance: str, heard: Heard
) -> AsyncIterator[asyncio.subprocess.Process]:
    """``pinecall start handover:app`` as ``instance``, dialling ``replica``; killed at the end."""
    env = os.environ | {
        "HANDOVER_URL": replica.url,
        "HANDOVER_KEY": keys.app,
        "HANDOVER_INSTANCE": instance,
        "HANDOVER_AGENT": msgspec.json.encode(BOOKING).decode(),
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "pinecall", "start", "handover:app", "--app-dir", str(APPS),
        env=env, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert process.stdout is not None
    reading = asyncio.create_task(heard.read(process.stdout))
    try:
        yield process
    finally:
        if process.returncode is None:
            process.kill()
        await process.wait()
        await reading


@contextlib.asynccontextmanager
async def console(replica: Process, keys: Keys) -> AsyncIterator[tuple[App, str]]:
    """A console on ``replica`` (it takes no call, new or parked), and the replica's name."""
    async with dial(replica, keys.app) as ws:
        socket = App(ws, "console")
        await socket.send("hello.v1", versions=[1], instance="console", org="org_acme")
        welcome = await socket.expect("welcome.v1")
        await socket.register("booking", takes_unclaimed=False)
        yield socket, welcome["replica"]


def tool_results(request: dict[str, Any]) -> list[Any]:
    """What the model was told of each tool (a Messages API request's ``tool_result`` blocks)."""
    return [
        json.loads(block["content"])
        for message in request["messages"]
        for block in message["content"]
        if isinstance(block, dict) and block.get("type") == "tool_result"
    ]


async def test_a_call_and_its_waiting_tool_go_to_the_other_app_when_its_process_or_replica_dies(
    worker_for: Callable[..., Worker],
    caller: Callable[[str], Awaitable[LabRoom]],
    livekit_api: api.LiveKitAPI,
    vendor_fakes: VendorFakes,
    keys: Keys,
    call_log_env: dict[str, str],
    call_events: CallEvents,
    heard: Heard,
) -> None:
    quick = {"PINECALL_APP_ANNOUNCE_S": "0.25", "PINECALL_APP_HEARTBEAT_S": "60"}
    vendor_fakes.deepgram.script(LINES["question"], LINES["question"])
    vendor_fakes.anthropic.script(
        Reply(tool=ToolUse(name="book_table", input={"day": "Thursday", "hang": "app-1"})),
        Reply(text="Your table is booked for Thursday."),
        Reply(tool=ToolUse(name="book_table", input={"day": "Friday", "hang": "app-2"})),
        Reply(text="Your table is booked for Friday."),
    )
    models = vendor_fakes.anthropic.requests
    async with served(call_log_env | quick) as (a, b):
        async with httpx.AsyncClient(base_url=a.url, timeout=30) as http:
            put = await http.put(
                "/v1/agents/booking",
                content=msgspec.json.encode(BOOKING),
                params={"org": "org_acme"},
                headers=bearer(keys.app) | {"content-type": "application/json"},
            )
            assert put.status_code == 200, put.text
        worker = worker_for(a.url)
        async with (
            asyncio.timeout(4 * WITHIN_S),
            serving(worker),
            console(a, keys) as (watching, replica_a),
            app_process(a, keys, "app-1", heard) as app_1,
            app_process(b, keys, "app-2", heard),
        ):
            await heard.until(lambda: heard.takes(replica_a) and len(heard.holding) == 2)
            replica_b = next(r for r in heard.holding if r != replica_a)
            await heard.until(lambda: heard.takes(replica_b))

            # 1. the app process holding the call dies while the call's tool runs in it
            room = await caller("call-1")
            await offer_call(
                livekit_api, worker.name, room="call-1", call="call_1", agent="booking"
            )
            playing = asyncio.create_task(
                play(room, [Say(line="question"), WaitForAgent(until_quiet_s=1.0), HangUp()])
            )
            await heard.until(lambda: heard.started("app-1", "call_1"))
            app_1.kill()
            first = await playing
            await call_events.wait("sealed", "call_1")

            # 2. the replica holding the socket dies while the tool runs in its app
            room = await caller("call-2")
            await offer_call(
                livekit_api, worker.name, room="call-2", call="call_2", agent="booking"
            )
            playing = asyncio.create_task(
                play(room, [Say(line="question"), WaitForAgent(until_quiet_s=1.0), HangUp()])
            )
            await heard.until(lambda: heard.started("app-2", "call_2"))
            async with app_process(a, keys, "app-3", heard):
                await heard.until(lambda: heard.takes(replica_a))
                b.kill()
                await b.proc.wait()
                second = await playing
                await call_events.wait("sealed", "call_2")
            await watching.nothing_queued()  # the console was handed no call, new or parked
            logs = [await read_log(a.url, keys.production, c) for c in ("call_1", "call_2")]

    answers = [{"booked": "Thursday", "by": "app-2"}, {"booked": "Friday", "by": "app-3"}]
    # the model was told the other app's answer, each once
    assert [told for request in models for told in tool_results(request)] == answers
    for log, (hung, answered), answer, caller_log in zip(
        logs, [("app-1", "app-2"), ("app-2", "app-3")], answers, [first, second], strict=True
    ):
        [tool] = [t["id"] for t in of_kind(log, "tool.call")]
        assert heard.of(log.call) == [
            ("attached", hung, "new"),
            ("start", hung, tool),  # it waited in the app killed, or cut off with its replica
            ("attached", answered, "handed"),  # then the other heard call.attached,
            ("start", answered, tool),  # then that tool call,
            ("done", answered, tool),  # and answered it: it finished once
        ]
        assert [r["result"] for r in of_kind(log, "tool.result")] == [answer]
        assert [t["text"] for t in of_kind(log, "turn.agent")] == [
            f"Your table is booked for {answer['booked']}."
        ]
        assert caller_log.agent_heard[-1] > caller_log.said[0][2]  # the caller heard it said
