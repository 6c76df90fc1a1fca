"""``pinecall-runtime doctor`` on a running platform: OK when all is well; each problem found and
named when it is there; a service that does not answer is a finding, never a crash."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import sys
from pathlib import Path

import msgspec
import pytest
import sqlalchemy as sa

from pinecall_call_log.store import migrate as call_log_migrations
from pinecall_contracts.fleet import CordonRequest, CordonSetting
from pinecall_loadlab.livekit import events as ev
from pinecall_loadlab.livekit.callers import LAB_AGENT, LAB_ORG, sip_call
from pinecall_loadlab.livekit.testing import API_KEY, API_SECRET
from pinecall_loadlab.scenarios.chain import Chain
from pinecall_runtime.doctor.command import line, report
from pinecall_servicekit import db
from pinecall_servicekit.errors import Unauthorized
from pinecall_servicekit.lifecycle import ExitCode
from pinecall_servicekit.operator import OperatorSettings, UpState
from pinecall_testkit.call_log import Keys, Replica, bearer, opening
from pinecall_testkit.roster import heartbeat
from pinecall_testkit.webhook_ingest import agent_left, sign

from .conftest import cli_env

WAIT_S = 10.0
"""Seconds each service has to answer doctor here: generous on a loaded machine; a service that
answers ends the wait at once."""


async def beat(platform: Chain, key: str, host: str, **body: object) -> None:
    """A worker's heartbeat, as it would post it; the dispatcher reads the roster now."""
    r = await platform.roster.post(
        "/v1/fleet/heartbeat", json=heartbeat(host, **body), headers=bearer(key)
    )
    assert r.status_code == 200, r.text
    for replica in platform.dispatchers:
        await replica.app.state.dispatcher.roster.refresh()


async def test_doctor_says_ok_when_all_is_well(
    platform: Chain, keys: Keys, operator: OperatorSettings
) -> None:
    await beat(platform, keys.production, "worker-a", active=1)
    await beat(platform, keys.sandbox, "worker-s", fleet="pinecall-sandbox")
    said = await report(operator, WAIT_S)
    assert [(f.level, f.check) for f in said.findings] == [
        ("ok", "services"),
        ("ok", "fleets"),
        ("ok", "workers"),
        ("ok", "offers"),
        ("ok", "admission"),
        ("ok", "follow-ups"),
        ("ok", "webhooks"),
        ("ok", "recordings"),
        ("ok", "migrations"),
    ], [line(f) for f in said.findings]
    assert said.ok


async def test_doctor_finds_each_problem_and_says_what_to_do(
    platform: Chain, keys: Keys, operator: OperatorSettings, database_url: str, call_log: Replica
) -> None:
    a, b, c = (f"pinecall/worker-{h}.1791067258" for h in "abc")
    await beat(platform, keys.production, "worker-a")
    await beat(platform, keys.production, "worker-b", minute={"ended": 4, "failed": 4})
    await beat(platform, keys.production, "worker-c", active=1)
    bus = platform.service.bus
    await bus.request(
        bus.subjects.ops_fleet_cordon,
        CordonRequest(worker="pinecall/worker-c"),
        CordonSetting,
        headers=bearer(keys.operator),
    )
    # the sandbox fleet: nobody heard. A caller kept in offers: offered to worker-a, never opened.
    async with asyncio.timeout(60):
        await sip_call(
            platform.livekit, platform.lk.url, API_KEY, API_SECRET, room="kept-1", fleet="pinecall"
        )
        await platform.lk.events.wait_for(
            ev.DispatchCreated, lambda e: e.room == "kept-1" and e.agent_name == a
        )
        [room] = await platform.service.store.rooms.of_room("production", "kept-1")
        await platform.outcome(room.call, "dispatched")
    # a visitor refused at admission: no worker of the sandbox heard for 90 s
    refused = await platform.dispatchers[0].post(
        "/v1/tokens", json={"agent": LAB_AGENT, "org": LAB_ORG}, headers=bearer(keys.app_sandbox)
    )
    assert (refused.status_code, refused.json()["code"]) == (503, "not_ready")
    # a webhook signed with another secret than LiveKit's
    body = agent_left("EV_forged1")
    forged = await platform.ingest.post(
        "/v1/livekit/webhook?world=production",
        content=body,
        headers={"authorization": sign(body, API_KEY, "another-secret-of-at-least-32-chars!")},
    )
    assert forged.status_code == 401
    # and a webhook to a URL that names no environment
    body = agent_left("EV_nowhere1")
    nowhere = await platform.ingest.post(
        "/v1/livekit/webhook",
        content=body,
        headers={"authorization": sign(body, API_KEY, API_SECRET)},
    )
    assert nowhere.status_code == 400
    # a recording the bucket refused, on its call's log
    await call_log.post("/v1/calls", json=opening("call_rf1"), headers=bearer(keys.production))
    refused_part = {
        "kind": "call.recording_failed",
        "ts": dt.datetime.now(dt.UTC).isoformat(),
        "data": {"reason": "UploadPart on recordings: 403 AccessDenied", "job": "answer"},
    }
    wrote = await call_log.post(
        "/v1/calls/call_rf1/entries",
        json={"after": 0, "entries": [refused_part]},
        headers=bearer(keys.production),
    )
    assert wrote.status_code == 200, wrote.text
    # call-log's schema left a revision behind its scripts
    engine = db.create_engine(database_url, pool_size=1)
    async with engine.begin() as conn:
        await conn.execute(sa.text("UPDATE calllog.alembic_version SET version_num = '0001'"))
    await engine.dispose()

    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "pinecall_runtime", "doctor", "--timeout", str(WAIT_S),
        env=cli_env(operator), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    async with asyncio.timeout(120):
        out, err = await proc.communicate()
    said = out.decode().splitlines()
    assert proc.returncode == ExitCode.PROBLEMS, (said, err.decode())

    def said_once(start: str) -> str:
        [found] = [s for s in said if s.startswith(start)]
        return found

    assert said_once("ok    services: every service answers")
    assert "→ start workers of pinecall-sandbox" in said_once(
        "FAIL  fleets: pinecall-sandbox: silent: no worker heard in 30 s"
    )
    assert "fleet cordon pinecall/worker-b" in said_once(
        f"FAIL  workers: {b}: failing (its last minute: 4 of 4 calls ended in error)"
    )
    assert said_once(f"info  workers: {c}: cordoned: finishing 1 call")
    kept = said_once(f"FAIL  offers: {room.call}: room kept-1 of pinecall (production) kept in")
    assert f"the last to {a}" in kept
    assert f"→ pinecall-runtime logs {room.call}" in kept
    assert said_once("WARN  admission: pinecall-sandbox: 1 caller refused at admission in 10 min")
    assert "the secret is not LiveKit's" in said_once(
        "WARN  webhooks: production: 1 webhook refused in 10 min, forged"
    )
    assert "end it in ?world=<environment>" in said_once(
        "WARN  webhooks: _unknown: 1 webhook refused in 10 min, no_environment"
    )
    assert "PINECALL_RECORDINGS_BUCKET" in said_once(
        "WARN  recordings: production: 1 recording failed in 60 min (the last: call_rf1, "
        "UploadPart on recordings: 403 AccessDenied)"
    )
    assert "→ pinecall-runtime migrate" in said_once(
        "FAIL  migrations: call-log: stale: the database is at 0001, its scripts at "
        + ",".join(call_log_migrations.heads())
    )

    # every worker of the fleet full: failing never empties a fleet, so worker-b still counts,
    # and doctor says so
    await beat(platform, keys.production, "worker-a", active=8)
    await beat(platform, keys.production, "worker-b", active=8, minute={"ended": 4, "failed": 4})
    findings = {(f.check, f.subject): f for f in (await report(operator, WAIT_S)).findings}
    assert findings["fleets", "pinecall"].level == "warn"
    assert findings["fleets", "pinecall"].what.startswith("full: none of its 16 seats free")
    assert findings["workers", b].level == "fail"
    assert findings["workers", b].what.startswith("failing (")
    assert (
        "still offered calls: no other worker of its fleet accepts" in findings["workers", b].what
    )

    wrong_key = msgspec.structs.replace(operator, operator_key="pck_000000000000_" + "x" * 43)
    with pytest.raises(Unauthorized):  # the one thing that stops doctor: the key itself
        await report(wrong_key, WAIT_S)


async def test_a_service_that_does_not_answer_is_a_finding_never_a_crash(
    operator: OperatorSettings,
) -> None:
    """Nothing runs on the test's namespace: each service is a FAIL of its own, its checks are
    skipped, and what can still be checked (the schemas) is."""
    said = await report(operator, WAIT_S)
    assert [(f.level, f.check, f.subject) for f in said.findings] == [
        ("fail", "services", "roster"),
        ("fail", "services", "dispatcher"),
        ("fail", "services", "call-log"),  # its $SRV.PING and its recordings-failed verb
        ("fail", "services", "call-log"),
        ("fail", "services", "webhook-ingest"),
        ("fail", "services", "reaper"),
        ("skip", "fleets", "fleets"),
        ("skip", "workers", "workers"),
        ("skip", "offers", "offers"),
        ("skip", "admission", "admission"),
        ("skip", "follow-ups", "follow-ups"),
        ("skip", "webhooks", "webhooks"),
        ("skip", "recordings", "recordings"),
        ("ok", "migrations", "migrations"),
    ]
    assert said.findings[1].what == (
        f"no replica answered {operator.nats_namespace}.ops.dispatch.offers in {WAIT_S:g} s"
    )
    assert not said.ok
    said = await report(msgspec.structs.replace(operator, nats_url="nats://127.0.0.1:1"), 1.0)
    assert [(f.level, f.subject) for f in said.findings][:1] == [("fail", "nats")]
    assert said.findings[-1].level == "ok"  # the schemas were still read


async def test_nats_unanswered_says_where_its_url_came_from_and_what_to_unset(
    operator: OperatorSettings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A shell that exported PINECALL_NATS_URL while up.json names the platform's NATS."""
    up = UpState(
        database_url=operator.database_url,
        nats_url=operator.nats_url,
        nats_namespace=operator.nats_namespace,
        operator_key=operator.operator_key,
    )
    (tmp_path / "up.json").write_bytes(msgspec.json.encode(up))
    for name in [n for n in os.environ if n.startswith("PINECALL_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("PINECALL_STATE_DIR", str(tmp_path))
    monkeypatch.setenv("PINECALL_NATS_URL", "nats://127.0.0.1:1")
    said = await report(OperatorSettings.load(), 1.0)
    assert (said.findings[0].level, said.findings[0].subject) == ("fail", "nats")
    assert said.findings[0].todo == (
        "check NATS, and PINECALL_NATS_URL from the environment (nats://127.0.0.1:1); "
        f"{tmp_path / 'up.json'} says {operator.nats_url}: unset PINECALL_NATS_URL to use it"
    )
