"""``pinecall-runtime fleet …`` and ``keys …`` as an operator runs them, against a live replica.

The CLI runs as a real subprocess; the replica runs in the test's loop and answers it over NATS.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import msgspec
import nats
import nats.aio.msg
import pytest

from pinecall_contracts.subjects import Subjects
from pinecall_servicekit.lifecycle import ExitCode
from pinecall_servicekit.operator import UpState
from pinecall_servicekit.platform import free_port
from pinecall_testkit.roster import Keys, Replica, bearer, heartbeat


async def cli(*args: str, env: dict[str, str]) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "pinecall_runtime",
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


@pytest.fixture
def env(
    database_url: str, nats_url: str, nats_namespace: str, keys: Keys, tmp_path: Path
) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("PINECALL_")}
    return base | {
        "PINECALL_DATABASE_URL": database_url,
        "PINECALL_NATS_URL": nats_url,
        "PINECALL_NATS_NAMESPACE": nats_namespace,
        "PINECALL_OPERATOR_KEY": keys.operator,
        "PINECALL_STATE_DIR": str(tmp_path),
    }


async def test_fleet_list_shows_the_workers_as_a_table_and_as_json(
    roster: Replica, keys: Keys, env: dict[str, str]
) -> None:
    await roster.post(
        "/v1/fleet/heartbeat",
        headers=bearer(keys.production),
        json=heartbeat(
            "worker-a", active=3, minute={"ended": 2, "turns": 9, "first_audio_p95_s": 1.31}
        ),
    )
    await roster.post(
        "/v1/fleet/heartbeat", headers=bearer(keys.production), json=heartbeat("worker-b", active=8)
    )
    await roster.post(  # every call of its minute ended in error, while worker-a accepts
        "/v1/fleet/heartbeat",
        headers=bearer(keys.production),
        json=heartbeat("worker-c", minute={"ended": 4, "failed": 4}),
    )
    code, out, err = await cli("fleet", "list", env=env)
    assert code == 0, err
    # no dispatcher runs here: what it would add is said missing, not left out in silence
    assert "not shown: each fleet's refusals and rooms waiting (no dispatcher answered" in err
    lines = out.splitlines()
    assert lines[0] == (
        "pinecall (production): 1 accepting, 1 full, 1 failing, 5/16 seats free, 11 calls"
    )
    assert lines[1].split() == [
        "WORKER",
        "STATE",
        "SEATS",
        "CALLS",
        "LOAD",
        "P95",
        "S",
        "FAILED",
        "CPU",
        "HEARD",
        "LIVEKIT",
    ]
    row_a = next(line for line in lines if line.startswith("pinecall/worker-a."))
    assert row_a.split()[:7] == [
        "pinecall/worker-a.1791067258",
        "accepting",
        "8",
        "3",
        "0.38",
        "1.31",
        "0/2",
    ]
    assert any(line.startswith("pinecall/worker-b.") and " full " in line for line in lines)
    row_c = next(line for line in lines if line.startswith("pinecall/worker-c."))
    assert row_c.split()[1] == "failing"
    assert row_c.split()[6] == "4/4"
    sandbox = lines.index(
        "pinecall-sandbox (sandbox): 0 accepting, 0 full, 0/0 seats free, 0 calls"
    )
    assert lines[sandbox + 1].startswith("  silent: no worker heard in 30 s")

    code, out, err = await cli("fleet", "list", "--json", env=env)
    assert code == 0, err
    listed = json.loads(out)
    fleets = {f["fleet"]: f for f in listed["fleets"]}
    assert {w["worker"]: w["state"] for w in fleets["pinecall"]["workers"]} == {
        "pinecall/worker-a.1791067258": "accepting",
        "pinecall/worker-b.1791067258": "full",
        "pinecall/worker-c.1791067258": "failing",
    }
    worker_c = next(w for w in fleets["pinecall"]["workers"] if w["state"] == "failing")
    assert (worker_c["minute"]["ended"], worker_c["minute"]["failed"]) == (4, 4)
    assert listed["offers"] is None  # no dispatcher answered


async def test_fleet_cordon_and_uncordon_travel_over_nats(
    roster: Replica, keys: Keys, env: dict[str, str]
) -> None:
    reply = await roster.post(
        "/v1/fleet/heartbeat", json=heartbeat(), headers=bearer(keys.production)
    )
    assert reply.json()["cordoned"] is False
    code, out, err = await cli("fleet", "cordon", "pinecall/worker-a.1791067258", env=env)
    assert (code, out.strip()) == (0, "pinecall/worker-a: cordoned"), err
    reply = await roster.post(
        "/v1/fleet/heartbeat", json=heartbeat(), headers=bearer(keys.production)
    )
    assert reply.json()["cordoned"] is True
    code, out, err = await cli("fleet", "uncordon", "pinecall/worker-a", env=env)
    assert (code, out.strip()) == (0, "pinecall/worker-a: uncordoned"), err
    # a start it is not heard as (one that never ran) names nobody: refused, nothing set
    code, out, err = await cli("fleet", "cordon", "pinecall/worker-a.123", env=env)
    assert (code, out) == (ExitCode.NOT_FOUND, ""), err
    assert "[not_found] no worker pinecall/worker-a.123 was heard in the last hour" in err
    reply = await roster.post(
        "/v1/fleet/heartbeat", json=heartbeat(), headers=bearer(keys.production)
    )
    assert reply.json()["cordoned"] is False


async def test_what_is_no_workers_name_is_a_usage_error(env: dict[str, str]) -> None:
    """Like every other bad argument (click's exit 2), before anything is asked."""
    for verb in ("cordon", "uncordon"):
        result, out, err = await cli("fleet", verb, "worker-a", env=env)
        assert result == ExitCode.USAGE, (out, err)
        assert "Invalid value for 'WORKER'" in err


@pytest.mark.parametrize(
    ("args", "change", "code", "words"),
    [
        (("fleet", "cordon", "nobody/worker-a"), {}, ExitCode.NOT_FOUND, "[not_found] no fleet"),
        (("fleet", "cordon", "pinecall/wokrer-a"), {}, ExitCode.NOT_FOUND, "[not_found]"),
        (("fleet", "list"), {"PINECALL_OPERATOR_KEY": ""}, ExitCode.FAILED, "[unauthorized]"),
        (
            ("fleet", "list"),
            {"PINECALL_OPERATOR_KEY": "pck_000000000000_" + "x" * 43},
            ExitCode.FAILED,
            "[unauthorized] unknown key",
        ),
        (
            ("fleet", "list"),
            {"PINECALL_NATS_URL": "nats://127.0.0.1:1"},
            ExitCode.UNAVAILABLE,
            "[bus_unavailable] NATS at nats://127.0.0.1:1 did not answer in 5 s: [Errno 111]",
        ),
        (("fleet", "list"), {"PINECALL_FLET": "typo"}, ExitCode.CONFIG, "unknown setting"),
        (("fleet", "list"), {"PINECALL_NATS_URL": "garbage"}, ExitCode.CONFIG, "not a nats://"),
        (("fleet", "list", "--fleet", "pinecal"), {}, ExitCode.NOT_FOUND, "[not_found] no fleet"),
        (("keys", "list"), {"PINECALL_DATABASE_URL": "garbage"}, ExitCode.CONFIG, "[settings]"),
        (
            ("migrate",),
            {"PINECALL_DATABASE_URL": "postgresql://postgres@127.0.0.1:1/test"},
            ExitCode.UNAVAILABLE,
            "[store_unavailable] migrating",
        ),
        (("keys", "revoke", "000000000000"), {}, ExitCode.NOT_FOUND, "[not_found]"),
        (
            ("keys", "create", "--kind", "fleet", "--name", "x"),
            {},
            ExitCode.USAGE,
            "--kind fleet needs --environment (production or sandbox)",
        ),
    ],
)
async def test_a_bad_command_is_a_named_error(
    roster: Replica,
    env: dict[str, str],
    args: tuple[str, ...],
    change: dict[str, str],
    code: int,
    words: str,
) -> None:
    result, out, err = await cli(*args, env=env | change)
    assert result == code, (out, err)
    assert words in err
    assert len(err.strip().splitlines()) == 1, err  # one line: what is wrong


async def test_keys_on_a_database_never_migrated_is_a_named_error(
    env: dict[str, str], empty_database_url: str
) -> None:
    """A database with no service's tables (the default ``test`` when no ``up`` runs): said,
    not a driver's traceback."""
    empty = {"PINECALL_DATABASE_URL": empty_database_url}
    code, out, err = await cli("keys", "list", env=env | empty)
    assert code == ExitCode.UNAVAILABLE, (out, err)
    assert "[store_unavailable] listing keys: the database has no table for it" in err
    assert "never migrated (pinecall-runtime migrate)" in err
    assert "Traceback" not in err


async def test_keys_create_list_revoke(roster: Replica, keys: Keys, env: dict[str, str]) -> None:
    code, secret, err = await cli(
        "keys", "create", "--kind", "fleet", "--name", "pool", "--environment", "sandbox", env=env
    )
    assert code == 0, err
    secret = secret.strip()
    ok = await roster.post(
        "/v1/fleet/heartbeat", json=heartbeat(fleet="pinecall-sandbox"), headers=bearer(secret)
    )
    assert ok.status_code == 200
    code, out, err = await cli("keys", "list", "--json", env=env)
    listed = {k["id"]: k for k in json.loads(out)}
    key_id = secret.split("_")[1]
    assert listed[key_id]["environment"] == "sandbox"
    assert all("secret" not in k for k in listed.values())
    code, out, err = await cli("keys", "revoke", key_id, env=env)
    assert (code, out.strip()) == (0, f"{key_id}: revoked"), err
    ring = roster.app.state.roster.keyring
    await ring.changes.wait_for(lambda: not ring.remembers(key_id), timeout=4)
    refused = await roster.post(
        "/v1/fleet/heartbeat", json=heartbeat(fleet="pinecall-sandbox"), headers=bearer(secret)
    )
    assert refused.status_code == 401


async def test_keys_create_a_service_key_of_no_environment(
    roster: Replica, env: dict[str, str]
) -> None:
    code, out, err = await cli(
        "keys", "create", "--kind", "service", "--name", "dispatcher", "--environment", "sandbox",
        env=env,
    )  # fmt: skip
    assert (code, out) == (ExitCode.FAILED, ""), err
    assert "a service key acts in every environment: give no environment" in err
    code, secret, err = await cli("keys", "create", "--kind", "service", "--name", "s", env=env)
    assert code == 0, err
    rows = await roster.get("/v1/ops/fleets", headers=bearer(secret.strip()))
    assert rows.status_code == 200
    code, out, err = await cli("keys", "list", "--json", env=env)
    [listed] = [k for k in json.loads(out) if k["id"] == secret.split("_")[1]]
    assert (listed["kind"], listed["environment"]) == ("service", None)


async def test_a_cordon_delivered_and_unanswered_says_it_may_still_be_applied(
    env: dict[str, str], nats_url: str, nats_namespace: str
) -> None:
    """A roster that is slow, not gone (a stopped process resumed later), acts on the request
    it got: the CLI says so instead of leaving the operator to think nothing happened."""
    heard: list[bytes] = []

    async def slow_roster(msg: nats.aio.msg.Msg) -> None:
        heard.append(msg.data)  # and never answers

    client = await nats.connect(nats_url)
    try:
        await client.subscribe(Subjects(nats_namespace).ops_fleet_cordon, cb=slow_roster)
        await client.flush()
        code, out, err = await cli("fleet", "cordon", "pinecall/worker-a", env=env)
    finally:
        await client.close()
    assert code == ExitCode.UNAVAILABLE, (out, err)
    assert "[bus_unavailable]" in err
    assert "the request was sent" in err
    assert "fleet list says whether it did" in err
    assert len(heard) == 1


async def test_an_exported_nats_url_wins_over_up_json_and_its_error_says_both_and_what_to_unset(
    roster: Replica, keys: Keys, env: dict[str, str], tmp_path: Path, nats_url: str
) -> None:
    """The README's flow: a shell that exported PINECALL_NATS_URL for ``./dev up`` (at a closed
    port, so up started an embedded NATS) runs the CLI while up runs."""
    names = ("DATABASE_URL", "NATS_URL", "NATS_NAMESPACE", "OPERATOR_KEY")
    up = UpState(**{n.lower(): env[f"PINECALL_{n}"] for n in names})
    (tmp_path / "up.json").write_bytes(msgspec.json.encode(up))
    bare = {k: v for k, v in env.items() if k.removeprefix("PINECALL_") not in names}
    code, out, err = await cli("fleet", "list", env=bare)  # nothing exported: up.json's
    assert code == 0, err
    closed = f"nats://127.0.0.1:{free_port()}"
    code, out, err = await cli("fleet", "list", env=bare | {"PINECALL_NATS_URL": closed})
    assert code == ExitCode.UNAVAILABLE, (out, err)
    assert err.startswith(f"Error: [bus_unavailable] NATS at {closed} did not answer"), err
    assert err.rstrip().endswith(
        f"(PINECALL_NATS_URL from the environment ({closed}); {tmp_path / 'up.json'} says "
        f"{nats_url}: unset PINECALL_NATS_URL to use it)"
    ), err
