"""``pinecall-runtime logs CALL``: the dispatcher's journal and call-log's entries of a call, in
the order they happened; a call nobody knows, and what is not a call id, are named errors."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import sys

import pytest
from click.testing import CliRunner

from pinecall_contracts.base import decode
from pinecall_contracts.dispatch import JobOffer
from pinecall_loadlab.livekit import events as ev
from pinecall_loadlab.livekit.callers import sip_call
from pinecall_loadlab.livekit.testing import API_KEY, API_SECRET
from pinecall_loadlab.scenarios.chain import Chain, heard_any
from pinecall_runtime.logs import logs, story
from pinecall_servicekit.calltrace import call_trace_id
from pinecall_servicekit.errors import BusUnavailable
from pinecall_servicekit.lifecycle import ExitCode
from pinecall_servicekit.operator import OperatorSettings
from pinecall_servicekit.testing.apps import Replica
from pinecall_testkit.call_log import Keys, bearer
from pinecall_testkit.roster import heartbeat

from .conftest import cli_env

WORKER = "pinecall/worker-a.1791067258"


async def cli(operator: OperatorSettings, *args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "pinecall_runtime", "logs", *args, "--timeout", "10",
        env=cli_env(operator), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    async with asyncio.timeout(120):
        out, err = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def heard(platform: Chain, call: str, what: str) -> None:
    """Wait until the dispatcher applied call-log's ``call.<what>`` of ``call``."""
    placing = platform.service.placing
    await placing.changes.wait_for(
        lambda: any(e.call == call and e.what == what for e in placing.handled_calls), timeout=30
    )


async def a_call_offered_and_run(platform: Chain, call_log: Replica, keys: Keys) -> JobOffer:
    """A caller rings; the dispatcher offers the room to worker-a, which opens the call on
    call-log, writes its turns and ends it, as a worker does; the dispatcher hears the open and
    the end (each a line of its journal)."""
    r = await platform.roster.post(
        "/v1/fleet/heartbeat", json=heartbeat("worker-a"), headers=bearer(keys.production)
    )
    assert r.status_code == 200, r.text
    await platform.service.roster.refresh()
    await sip_call(
        platform.livekit, platform.lk.url, API_KEY, API_SECRET, room="logs-1", fleet="pinecall"
    )
    [created] = await platform.lk.events.wait_for(
        ev.DispatchCreated, lambda e: e.room == "logs-1" and e.agent_name == WORKER
    )
    offer = decode(created.metadata, JobOffer)
    worker = bearer(keys.production)
    opened = {
        "call": offer.call,
        "agent": offer.agent,
        "org": offer.org,
        "environment": offer.environment,
        "room": offer.room,
        "worker": WORKER,
    }
    assert (await call_log.post("/v1/calls", json=opened, headers=worker)).status_code == 200
    await heard(platform, offer.call, "opened")  # its journal line is stamped before the turns
    now = dt.datetime.now(dt.UTC).isoformat()
    turns = {
        "after": 0,
        "entries": [
            {"kind": "turn.user", "ts": now, "data": {"text": "I need to move my booking"}},
            {"kind": "turn.agent", "ts": now, "data": {"text": "Sure.", "first_audio_s": 0.81}},
        ],
    }
    r = await call_log.post(f"/v1/calls/{offer.call}/entries", json=turns, headers=worker)
    assert r.status_code == 200, r.text
    r = await call_log.post(
        f"/v1/calls/{offer.call}/seal", json={"outcome": "completed"}, headers=worker
    )
    assert r.status_code == 200, r.text
    await heard(platform, offer.call, "ended")
    return offer


async def test_logs_tells_a_calls_offers_and_entries_in_order(
    platform: Chain, call_log: Replica, keys: Keys, operator: OperatorSettings
) -> None:
    async with asyncio.timeout(60):
        offer = await a_call_offered_and_run(platform, call_log, keys)
    code, out, err = await cli(operator, offer.call)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == (
        f"call {offer.call}: agent {offer.agent} ({offer.org or 'no org'}) in production, "
        f"room logs-1, worker {WORKER}"
    )
    assert lines[1].startswith("  sealed (completed); opened ")
    trace = call_trace_id("production", "logs-1")  # the call's one trace (issue 22)
    assert lines[1].endswith(f"; trace {trace}")
    told = [heard_any(line).split(maxsplit=3)[2:] for line in lines[2:]]  # after the time
    assert told == [
        ["offer", f"offered to {WORKER}: 8 seats free, heard N s ago (offer 1)"],
        ["#1", f"call.started   worker {WORKER}, room logs-1, agent {offer.agent}"],
        ["offer", f"opened by {WORKER}"],
        ["#2", "turn.user      'I need to move my booking'"],
        ["#3", "turn.agent     'Sure.', first audio 0.81 s"],
        ["#4", "call.ended     completed"],
        ["#5", "call.sealed"],
        ["offer", "ended (completed)"],
    ]

    code, out, err = await cli(operator, offer.call, "--json")
    assert code == 0, err
    document = json.loads(out)
    assert [e["seq"] for e in document["entries"]] == [1, 2, 3, 4, 5]
    assert len(document["journal"]) == 3
    assert (document["record"]["state"], document["missing"]) == ("sealed", [])
    assert document["trace"] == trace


async def test_logs_of_a_call_nobody_knows_is_a_named_error(
    platform: Chain, operator: OperatorSettings
) -> None:
    code, out, err = await cli(operator, "call_nobody")
    assert (code, out) == (ExitCode.NOT_FOUND, "")
    assert "[not_found] no call call_nobody" in err


def test_what_is_no_call_id_is_refused_before_anything_is_asked() -> None:
    refused = CliRunner().invoke(logs, ["not a call"], env={"PINECALL_NATS_URL": "nats://0:1"})
    assert refused.exit_code == ExitCode.USAGE
    assert "'not a call' is not a call id" in refused.output


async def test_logs_shows_what_answered_and_names_what_did_not(
    chain: Chain, keys: Keys, operator: OperatorSettings
) -> None:
    """No call-log runs: the journal is shown, the missing entries named, the exit 69."""
    r = await chain.roster.post(
        "/v1/fleet/heartbeat", json=heartbeat("worker-a"), headers=bearer(keys.production)
    )
    assert r.status_code == 200, r.text
    await chain.service.roster.refresh()
    async with asyncio.timeout(60):
        await sip_call(
            chain.livekit, chain.lk.url, API_KEY, API_SECRET, room="alone-1", fleet="pinecall"
        )
        [created] = await chain.lk.events.wait_for(
            ev.DispatchCreated, lambda e: e.room == "alone-1" and e.agent_name == WORKER
        )
    call = decode(created.metadata, JobOffer).call
    await chain.outcome(call, "dispatched")
    code, out, err = await cli(operator, call)
    assert code == ExitCode.UNAVAILABLE, err
    assert out.splitlines()[0] == f"call {call}: call-log holds no such call (never opened)"
    assert heard_any(out.splitlines()[1]).split(maxsplit=3)[2:] == [
        "offer",
        f"offered to {WORKER}: 8 seats free, heard N s ago (offer 1)",
    ]
    assert "not shown: call-log: no replica answered in 10 s" in err


async def test_logs_with_nothing_answering_says_so(operator: OperatorSettings) -> None:
    with pytest.raises(BusUnavailable, match="neither the dispatcher nor call-log answered"):
        await story(operator, "call_1", 1.0)


async def test_a_call_nobody_offered_with_call_log_down_says_which_knows_nothing(
    chain: Chain, operator: OperatorSettings
) -> None:
    """The dispatcher answers and has no offer of it; call-log does not answer (none runs)."""
    with pytest.raises(BusUnavailable) as raised:
        await story(operator, "call_nobody", 2.0)
    assert raised.value.detail == (
        "no call call_nobody: the dispatcher's journal has no offer of it, "
        "and call-log: no replica answered in 2 s"
    )


async def test_logs_of_a_call_only_call_log_knows_shows_its_log(
    platform: Chain, call_log: Replica, keys: Keys, operator: OperatorSettings
) -> None:
    """A call opened on call-log with no ring the dispatcher saw: the dispatcher answers
    not_found for it (as call-log does for a call it does not hold), and logs shows call-log's
    part, exit 0."""
    opened = {
        "call": "call_unrung",
        "agent": "support-bot",
        "org": "org_acme",
        "environment": "production",
        "room": "unrung-1",
        "worker": WORKER,
    }
    r = await call_log.post("/v1/calls", json=opened, headers=bearer(keys.production))
    assert r.status_code == 200, r.text
    await heard(platform, "call_unrung", "opened")
    code, out, err = await cli(operator, "call_unrung")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("call call_unrung: agent support-bot")
    assert [heard_any(line).split(maxsplit=3)[2] for line in lines[2:]] == ["#1"]
    assert "offer" not in out.split("\n", 2)[2]
