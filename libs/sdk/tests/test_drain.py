"""A process that leaves on purpose (issue 16, acceptance 3, from the SDK's side): ``drain`` hands
the app's calls to another process and returns once the tools it runs have answered;
``pinecall start`` (a real process) drains on SIGTERM and exits 0."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from typing import Any

from pinecall import App, ToolContext
from pinecall_testkit.appsocket import app as app_socket
from pinecall_testkit.appsocket import ask, open_call, service
from pinecall_testkit.call_log import Keys, Listening, bearer

from .conftest import APPS

ARGUMENTS = {"time": "19:00", "party": 2, "name": "Ada"}


async def _draining_entries(replica: Listening, keys: Keys) -> list[dict[str, Any]]:
    log = await replica.client.get(
        "/v1/agents/booking/log",
        params={"environment": "production"},
        headers=bearer(keys.operator),
    )
    return [e["data"] for e in log.json()["entries"] if e["kind"] == "agent.draining"]


async def test_drain_hands_the_calls_and_returns_once_the_tools_it_runs_answered(
    replica: Listening, keys: Keys, booking: dict[str, Any], prompt_hash: str
) -> None:
    app = App(replica.url, keys.app, org="org_acme", instance="app-1")
    agent = app.agent("booking", definition=booking)
    started, release = asyncio.Event(), asyncio.Event()

    @agent.tool("book_table")
    async def book(arguments: dict[str, Any], context: ToolContext) -> Any:
        started.set()
        await release.wait()
        return {"reference": "BK-1"}

    async with app.running():
        await open_call(replica, keys, agent="booking", prompt_hash=prompt_hash)
        asking = ask(replica, keys, name="book_table", arguments=ARGUMENTS)
        await started.wait()
        async with app_socket(replica, keys, "app-2") as other:
            await other.register("booking")
            draining = asyncio.create_task(app.drain())
            attached = await other.expect("call.attached.v1")
            assert (attached["call"], attached["why"]) == ("call_1", "handed")
            await app.wait_for(lambda: "booking" in app.drained and not app.calls)
            assert not draining.done()  # the tool it runs has not answered yet
            release.set()
            await draining
            assert (await asking)["result"] == {"reference": "BK-1"}  # the drained app's
            await other.nothing_queued()  # and the tool never went to the other: it ran once
    drained = app.drained["booking"]
    assert (drained.handed, drained.parked, drained.app) == (1, 0, "app-1")
    assert [
        (e["app"], e["handed"], e["parked"]) for e in await _draining_entries(replica, keys)
    ] == [("app-1", 1, 0)]


async def test_pinecall_start_drains_on_sigterm_and_exits_0(
    replica: Listening, keys: Keys, prompt_hash: str
) -> None:
    hub = service(replica).hub
    env = os.environ | {"HELD_URL": replica.url, "HELD_KEY": keys.app, "HELD_INSTANCE": "held-1"}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "pinecall", "start", "held:app", "--app-dir", str(APPS),
        env=env, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        await hub.changes.wait_for(
            lambda: any(
                s.instance == "held-1" and "booking" in s.agents for s in hub.sockets.values()
            ),
            30,
        )
        await open_call(replica, keys, agent="booking", prompt_hash=prompt_hash)
        assert hub.holder["call_1"].instance == "held-1"
        answer = await ask(replica, keys, name="book_table", arguments=ARGUMENTS)
        assert answer["result"] == {"reference": "BK-tc_1"}  # the process's tool answered
        async with app_socket(replica, keys, "app-2") as other:
            await other.register("booking")
            process.send_signal(signal.SIGTERM)
            attached = await other.expect("call.attached.v1")
            assert (attached["call"], attached["why"]) == ("call_1", "handed")
            async with asyncio.timeout(30):  # a failure bound, never a pace
                code = await process.wait()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.stderr is not None
    said = (await process.stderr.read()).decode()
    assert code == 0, said
    assert "SIGTERM: draining booking" in said
    assert [(e["app"], e["handed"]) for e in await _draining_entries(replica, keys)] == [
        ("held-1", 1)
    ]
