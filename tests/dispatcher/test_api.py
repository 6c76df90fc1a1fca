"""The dispatcher's endpoints and ops verbs: bad input is a problem detail and writes nothing; the
journal, the rooms waiting and kept, the metrics, the quota verb."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from pinecall_contracts.dispatch import Journal, JournalRequest, OffersRequest, OffersSnapshot
from pinecall_dispatcher.main import cli
from pinecall_dispatcher.store import RoomRow
from pinecall_dispatcher.store.tables import QUOTAS, REFUSALS, ROOMS
from pinecall_loadlab.livekit import events as ev
from pinecall_loadlab.livekit.callers import sip_call
from pinecall_loadlab.livekit.testing import API_KEY, API_SECRET
from pinecall_loadlab.scenarios.chain import Chain, heard_any
from pinecall_servicekit.errors import BadRequest, NotFound, Unauthorized
from pinecall_servicekit.testing.metrics import unregistered
from pinecall_testkit.call_log import Keys, bearer

from .conftest import SHORT


@pytest.fixture
def dispatcher_numbers() -> dict[str, Any]:
    return SHORT | {"kept_s": 1.0}


async def written(chain: Chain) -> list[int]:
    """How many rows each table the endpoints write holds."""
    async with chain.service.store.engine.connect() as conn:
        return [
            (await conn.execute(sa.select(sa.func.count()).select_from(t))).scalar_one()
            for t in (ROOMS, REFUSALS, QUOTAS)
        ]


TOKEN_BAD = [
    (b"{not json", 400),
    (b'{"agent": 7}', 400),
    (b'{"agent": "Not An Agent"}', 400),
    (b'{"agent": "support-bot", "identity": "a b"}', 400),
    (b'{"agent": "support-bot", "org": 5}', 400),
    (b"[]", 400),
    (b"[" * 100_000, 400),  # nested deeper than the decoder goes: said, not a 500
]


@pytest.mark.parametrize(("body", "status"), TOKEN_BAD)
async def test_a_bad_token_request_is_a_problem_and_writes_nothing(
    chain: Chain, keys: Keys, body: bytes, status: int
) -> None:
    r = await chain.dispatchers[0].post(
        "/v1/tokens",
        content=body,
        headers=bearer(keys.app) | {"content-type": "application/json"},
    )
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    assert r.json()["code"] == "bad_request"
    assert await written(chain) == [0, 0, 0]


@pytest.mark.parametrize(
    ("key", "status"), [(None, 401), ("pck_000000000000_nope-nope-nope-nope", 401), ("op", 403)]
)
async def test_a_token_needs_an_app_key(
    chain: Chain, keys: Keys, key: str | None, status: int
) -> None:
    headers = {} if key is None else bearer(keys.operator if key == "op" else key)
    r = await chain.dispatchers[0].post(
        "/v1/tokens", json={"agent": "support-bot"}, headers=headers
    )
    assert r.status_code == status
    assert r.headers["content-type"].startswith("application/problem+json")
    assert await written(chain) == [0, 0, 0]


QUOTA_BAD = [
    ({"org": "acme", "environment": "production", "concurrent_calls": -1}, 400),
    ({"org": "acme", "environment": "production", "concurrent_calls": "3"}, 400),
    ({"org": "", "environment": "production", "concurrent_calls": 3}, 400),
    ({"org": "acme", "environment": "mars", "concurrent_calls": 3}, 400),
    ({"org": "acme", "concurrent_calls": 3}, 400),
    (
        {"org": "ac\x00me", "environment": "production", "concurrent_calls": 3},
        422,
    ),  # no NUL in Postgres
]


@pytest.mark.parametrize(("body", "status"), QUOTA_BAD)
async def test_a_bad_quota_is_a_problem_and_writes_nothing(
    chain: Chain, keys: Keys, body: dict[str, Any], status: int
) -> None:
    r = await chain.dispatchers[0].post("/v1/ops/quotas", json=body, headers=bearer(keys.operator))
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    assert await written(chain) == [0, 0, 0]


@pytest.mark.parametrize(
    ("path", "key", "status"),
    [
        ("/v1/ops/offers", None, 401),
        ("/v1/ops/offers", "app", 403),
        ("/v1/ops/calls/call_1/journal", "production", 403),
        ("/v1/ops/calls/bad%20call/journal", "operator", 400),
    ],
)
async def test_the_ops_endpoints_need_an_operator_key_and_a_call_id(
    chain: Chain, keys: Keys, path: str, key: str | None, status: int
) -> None:
    headers = {} if key is None else bearer(getattr(keys, key))
    r = await chain.dispatchers[0].get(path, headers=headers)
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    if key != "operator":
        r = await chain.dispatchers[0].post(
            "/v1/ops/quotas",
            json={"org": "acme", "environment": "production", "concurrent_calls": 1},
            headers=headers,
        )
        assert r.status_code == status
    assert await written(chain) == [0, 0, 0]


async def test_the_journal_of_a_call_the_dispatcher_never_saw_is_not_found(
    chain: Chain, keys: Keys
) -> None:
    """As call-log answers for a call it does not hold: 404, never an empty 200."""
    r = await chain.dispatchers[0].get(
        "/v1/ops/calls/call_nobody/journal", headers=bearer(keys.operator)
    )
    assert r.status_code == 404, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    assert r.json()["code"] == "not_found"
    assert "no call call_nobody" in r.json()["detail"]
    bus = chain.service.bus
    with pytest.raises(NotFound):
        await bus.request(
            bus.subjects.ops_dispatch_journal,
            JournalRequest(call="call_nobody"),
            Journal,
            headers=bearer(keys.operator),
        )


async def test_the_journal_and_the_rooms_waiting_and_kept_over_http_nats_and_metrics(
    chain: Chain, keys: Keys
) -> None:
    """A worker that never answers: its room waits (offered, then given to an overflow that no
    worker holds, so it is kept), and the operator sees it everywhere."""
    mute = await chain.worker("mute", seats=4)
    mute.mute()
    async with asyncio.timeout(60):
        caller = await sip_call(
            chain.livekit, chain.lk.url, API_KEY, API_SECRET, room="kept-1", fleet="pinecall"
        )
        [row] = await _row_when_overflowed(chain, "kept-1")
    ops = chain.dispatchers[0]
    r = await ops.get(f"/v1/ops/calls/{row.call}/journal", headers=bearer(keys.operator))
    lines = [heard_any(line["line"]) for line in r.json()["lines"]]
    assert lines == [
        f"room {row.call}: offered to {mute.name}: 4 seats free, heard N s ago (offer 1)",
        f"room {row.call}: to the overflow pinecall/overflow: no worker heard lately has a seat",
    ]
    bus = chain.service.bus
    over_nats = await bus.request(
        bus.subjects.ops_dispatch_journal,
        JournalRequest(call=row.call),
        Journal,
        headers=bearer(keys.operator),
    )
    assert [heard_any(x.line) for x in over_nats.lines] == lines
    with pytest.raises(Unauthorized):
        await bus.request(bus.subjects.ops_dispatch_journal, JournalRequest(call=row.call), Journal)
    with pytest.raises(BadRequest):  # not a call id: refused by the verb, as on HTTP
        await bus.request(
            bus.subjects.ops_dispatch_journal,
            JournalRequest(call="not a call"),
            Journal,
            headers=bearer(keys.operator),
        )
    snapshot = await bus.request(
        bus.subjects.ops_dispatch_offers,
        OffersRequest(fleet="pinecall"),
        OffersSnapshot,
        headers=bearer(keys.operator),
    )
    [fleet] = snapshot.fleets
    assert (fleet.fleet, fleet.environment, fleet.waiting, fleet.in_offers) == (
        "pinecall",
        "production",
        1,
        1,
    )
    [kept] = snapshot.kept
    assert (kept.call, kept.state, kept.offers, kept.worker) == (
        row.call,
        "overflow",
        1,
        "pinecall/overflow",
    )
    await chain.service.sweep()  # the metrics are what the last sweep read
    metrics = (await ops.get("/metrics")).text
    assert 'pinecall_fleet{fleet="pinecall",what="waiting"} 1.0' in metrics
    assert 'pinecall_offers_total{fleet="pinecall",reason="no_seat",to="overflow"} 1.0' in metrics
    assert 'pinecall_ring_to_offer_seconds_count{fleet="pinecall"} 1.0' in metrics
    assert unregistered(metrics, "dispatcher") == []
    await caller.leave()


async def _row_when_overflowed(chain: Chain, room: str) -> list[RoomRow]:
    """The room's row once its dispatch to the overflow is made (4 s after its offer: past the
    kept time of 1 s)."""
    await chain.lk.events.wait_for(
        ev.DispatchCreated, lambda e: e.room == room and e.agent_name == "pinecall/overflow"
    )
    rows = await chain.service.store.rooms.of_room("production", room)
    await chain.outcome(rows[0].call, "dispatched", count=2)  # the offer, then the overflow
    return rows


def test_the_quota_verb_sets_and_lists_quotas(database_url: str) -> None:
    env = {"PINECALL_DATABASE_URL": database_url, "PINECALL_STATE_DIR": "/nonexistent"}
    runner = CliRunner()
    done = runner.invoke(
        cli,
        ["quota", "set", "acme", "--environment", "sandbox", "--concurrent-calls", "5"],
        env=env,
    )
    assert done.exit_code == 0, done.output
    assert done.output.strip() == "acme (sandbox): 5 concurrent calls"
    listed = runner.invoke(cli, ["quota", "list", "--json"], env=env)
    assert '"org":"acme"' in listed.output
    bad = runner.invoke(cli, ["quota", "set", "acme", "--concurrent-calls", "-1"], env=env)
    assert bad.exit_code == 2


async def test_health_readiness_and_openapi(chain: Chain) -> None:
    ops = chain.dispatchers[0]
    assert (await ops.get("/healthz")).json() == {"status": "ok"}
    ready = (await ops.get("/readyz")).json()
    assert ready == {"ready": True, "checks": {"postgres": True, "nats": True, "consumer": True}}
    schema = (await ops.get("/schema/openapi.json")).json()
    assert {"/v1/tokens", "/v1/ops/offers", "/v1/ops/quotas"} <= set(schema["paths"])


async def test_fleet_list_says_each_fleets_rooms_waiting(chain: Chain, keys: Keys) -> None:
    """``pinecall-runtime fleet list`` (the roster's verb) asks the dispatcher's ops verb too."""
    import os
    import sys

    mute = await chain.worker("mute", seats=4)
    mute.mute()
    async with asyncio.timeout(60):
        await sip_call(
            chain.livekit, chain.lk.url, API_KEY, API_SECRET, room="waits-1", fleet="pinecall"
        )
        await _row_when_overflowed(chain, "waits-1")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINECALL_")} | {
        "PINECALL_NATS_URL": chain.config.nats_url,
        "PINECALL_NATS_NAMESPACE": chain.config.namespace,
        "PINECALL_OPERATOR_KEY": keys.operator,
        "PINECALL_STATE_DIR": "/nonexistent",
    }
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "pinecall_runtime", "fleet", "list",
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    async with asyncio.timeout(60):
        out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    lines = out.decode().splitlines()
    assert lines[0].startswith("pinecall (production): 1 accepting")  # the mute one
    assert lines[0].endswith(", 1 room waiting in 10 min")
    assert any(line.endswith(", 0 rooms waiting in 10 min") for line in lines)  # the sandbox
