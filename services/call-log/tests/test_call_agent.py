"""A call runs its agent (issue 16, "Agents, as data"; "The worker runs the call's agent"): the
open keeps the latest version of the call's agent on the call, its prompt's hash on the call and
on ``call.started``; a retried open keeps the version it opened with; a call of an agent its org
does not define opens as before. The worker follows the app's commands through a long poll."""

from __future__ import annotations

import asyncio
import hashlib

import pytest

from pinecall_call_log.service import CallLogService
from pinecall_contracts.agents import agent_of
from pinecall_contracts.base import decode
from pinecall_contracts.calls import CallCommands, CallRecord
from pinecall_testkit.call_log import Keys, Replica, bearer, opening

PROMPT = "You answer the phone for Acme's bistro. Be brief."
AGENT = {
    "name": "support-bot",
    "prompt": PROMPT,
    "greeting": "Acme's bistro, how can I help?",
    "voice": "voice-bistro",
    "tools": [{"name": "book_slot", "timeout_s": 8}],
    "max_call_seconds": 600,
}


def service(call_log: Replica) -> CallLogService:
    found: CallLogService = call_log.app.state.call_log
    return found


async def define(call_log: Replica, keys: Keys, org: str = "org_acme", **changes: object) -> None:
    put = await call_log.put(
        "/v1/agents/support-bot",
        json=AGENT | changes,
        params={"org": org},
        headers=bearer(keys.app),
    )
    assert put.status_code == 200, put.text


async def open_call(call_log: Replica, keys: Keys, call: str) -> CallRecord:
    r = await call_log.post("/v1/calls", json=opening(call), headers=bearer(keys.production))
    assert r.status_code == 200, r.text
    return decode(r.content, CallRecord)


async def started(call_log: Replica, keys: Keys, call: str) -> dict[str, object]:
    r = await call_log.get(f"/v1/calls/{call}/entries", headers=bearer(keys.operator))
    first = r.json()["entries"][0]
    assert first["kind"] == "call.started"
    data: dict[str, object] = first["data"]
    return data


async def test_a_call_opens_on_its_agents_latest_version_and_keeps_it(
    call_log: Replica, keys: Keys
) -> None:
    await define(call_log, keys)
    first = await open_call(call_log, keys, "call_1")
    version = agent_of(first.config)
    assert version is not None
    digest = hashlib.sha256(PROMPT.encode()).hexdigest()
    assert (version.version, version.prompt_hash, first.prompt_hash) == (1, digest, digest)
    assert version.definition.voice == "voice-bistro"
    assert [t.name for t in version.definition.tools] == ["book_slot"]
    assert first.config["voice"] == "alloy"  # the ring's own config is kept beside it
    assert await started(call_log, keys, "call_1") == {
        "worker": "pinecall/worker-a.1791067258",
        "room": "room-call_1",
        "agent": "support-bot",
        "prompt_hash": digest,
        "version": 1,
    }
    await define(call_log, keys, prompt="You answer for the bistro's new owner.")
    # a retried open (its answer lost) gets the call as it opened: the version it runs
    again = await open_call(call_log, keys, "call_1")
    assert again.config == first.config
    assert again.prompt_hash == digest
    read = await call_log.get("/v1/calls/call_1", headers=bearer(keys.production))
    assert decode(read.content, CallRecord).config == first.config
    later = await open_call(call_log, keys, "call_2")
    newer = agent_of(later.config)
    assert newer is not None
    assert newer.version == 2
    assert later.prompt_hash == newer.prompt_hash != digest
    assert (await started(call_log, keys, "call_2"))["version"] == 2


async def test_a_call_of_an_agent_its_org_does_not_define_opens_as_before(
    call_log: Replica, keys: Keys
) -> None:
    await define(call_log, keys, org="org_other")  # another org's agent of the same name
    record = await open_call(call_log, keys, "call_1")
    assert agent_of(record.config) is None
    assert record.config == {"voice": "alloy"}
    assert record.prompt_hash == "sha256:5b1c0e"  # the opener's own, as before
    assert await started(call_log, keys, "call_1") == {
        "worker": "pinecall/worker-a.1791067258",
        "room": "room-call_1",
        "agent": "support-bot",
        "prompt_hash": "sha256:5b1c0e",
    }


async def test_the_command_poll_waits_for_a_command_and_reads_on_after_it(
    call_log: Replica, keys: Keys
) -> None:
    opened = await open_call(call_log, keys, "call_1")
    log = service(call_log)
    fleet = bearer(keys.production)
    path = "/v1/calls/call_1/commands"

    async def poll(after: int, wait_s: float = 30.0) -> CallCommands:
        r = await call_log.get(path, params={"after": after, "wait_s": wait_s}, headers=fleet)
        assert r.status_code == 200, r.text
        return decode(r.content, CallCommands)

    polling = asyncio.create_task(poll(opened.last_seq))
    await log.changes.wait_for(lambda: log.polling("call_1") == 1, 10)
    say_seq, _ = await log.command("call_1", {"id": "cmd_1", "kind": "say", "text": "One moment."})
    heard = await polling
    assert [(c.seq, c.id, c.kind, c.text) for c in heard.commands] == [
        (say_seq, "cmd_1", "say", "One moment.")
    ]
    # the worker's own entries between commands are not commands
    batch = {"after": 0, "entries": [{"kind": "turn.user", "ts": opened.opened_at.isoformat()}]}
    await call_log.post("/v1/calls/call_1/entries", json=batch, headers=fleet)
    end_seq, _ = await log.command("call_1", {"id": "cmd_2", "kind": "end", "text": None})
    on = await poll(say_seq)
    assert [(c.seq, c.kind) for c in on.commands] == [(end_seq, "end")]
    assert (await poll(end_seq, wait_s=0)).commands == []
    # an ended call answers at once, with its state: the follower stops
    polling = asyncio.create_task(poll(end_seq))
    await log.changes.wait_for(lambda: log.polling("call_1") == 1, 10)
    await log.end("call_1", "completed", None, seal=False)
    over = await polling
    assert (over.commands, over.state) == ([], "ended")


@pytest.mark.parametrize(
    ("key", "call", "params", "status"),
    [
        ("sandbox", "call_1", {}, 403),  # a fleet key of another environment
        ("app", "call_1", {}, 403),  # only the call's worker follows its commands
        ("production", "call_nope", {}, 404),
        ("production", "call_1", {"wait_s": 31}, 400),  # past MAX_WAIT_S
        ("production", "call_1", {"after": -1}, 400),
    ],
)
async def test_the_command_poll_refuses_what_is_not_the_calls_worker_asking_it_well(
    call_log: Replica, keys: Keys, key: str, call: str, params: dict[str, int], status: int
) -> None:
    await open_call(call_log, keys, "call_1")
    r = await call_log.get(
        f"/v1/calls/{call}/commands", params=params, headers=bearer(getattr(keys, key))
    )
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == "application/problem+json"
