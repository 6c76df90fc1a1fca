"""One roster replica on real Postgres and NATS: heartbeats, the fleet, wanted, metrics, keys."""

from __future__ import annotations

import pytest

from pinecall_servicekit.testing.metrics import unregistered
from pinecall_testkit.roster import Keys, Replica, bearer, heartbeat


async def test_a_heartbeat_is_counted_and_answered(roster: Replica, keys: Keys) -> None:
    r = await roster.post(
        "/v1/fleet/heartbeat", json=heartbeat(active=2), headers=bearer(keys.production)
    )
    assert r.status_code == 200
    assert r.json() == {"type": "fleet.heartbeat_reply.v1", "cordoned": False, "fleet_full": False}
    fleet = (
        await roster.get(
            "/v1/ops/fleet", params={"fleet": "pinecall"}, headers=bearer(keys.operator)
        )
    ).json()["fleets"][0]
    assert fleet["environment"] == "production"
    [row] = fleet["workers"]
    assert (row["worker"], row["state"], row["seats"], row["active"]) == (
        "pinecall/worker-a.1791067258",
        "accepting",
        8,
        2,
    )
    assert fleet["totals"] == {
        "type": "fleet.totals.v1",
        "accepting": 1,
        "full": 0,
        "seats": 8,
        "seats_free": 6,
        "calls": 2,
    }


async def test_a_full_fleet_is_said_in_the_answer(roster: Replica, keys: Keys) -> None:
    r = await roster.post(
        "/v1/fleet/heartbeat", json=heartbeat(active=8), headers=bearer(keys.production)
    )
    assert r.json()["fleet_full"] is True


async def test_the_fleets_rows_are_stored_by_default(roster: Replica, keys: Keys) -> None:
    r = await roster.get("/v1/ops/fleets", headers=bearer(keys.operator))
    assert r.status_code == 200
    assert {(f["name"], f["environment"]) for f in r.json()["fleets"]} == {
        ("pinecall", "production"),
        ("pinecall-sandbox", "sandbox"),
    }


async def test_the_fleets_rows_are_served_over_nats_with_an_operator_key(
    roster: Replica, keys: Keys
) -> None:
    from pinecall_contracts.fleet import FleetListRequest, FleetRecords
    from pinecall_servicekit.bus import Bus
    from pinecall_servicekit.errors import Unauthorized

    bus: Bus = roster.app.state.roster.bus
    records = await bus.request(
        bus.subjects.ops_fleet_records,
        FleetListRequest(fleet="pinecall-sandbox"),
        FleetRecords,
        headers=bearer(keys.operator),
    )
    assert [(f.name, f.environment) for f in records.fleets] == [("pinecall-sandbox", "sandbox")]
    with pytest.raises(Unauthorized):
        await bus.request(bus.subjects.ops_fleet_records, FleetListRequest(), FleetRecords)


async def test_a_service_key_reads_the_fleets_rows_and_the_roster_over_http_and_nats(
    roster: Replica, keys: Keys
) -> None:
    from pinecall_contracts.fleet import FleetListRequest, FleetRecords, RosterSnapshot
    from pinecall_servicekit.bus import Bus

    await roster.post("/v1/fleet/heartbeat", json=heartbeat(), headers=bearer(keys.production))
    rows = await roster.get("/v1/ops/fleets", headers=bearer(keys.service))
    assert rows.status_code == 200
    assert {f["name"] for f in rows.json()["fleets"]} == {"pinecall", "pinecall-sandbox"}
    fleet = await roster.get("/v1/ops/fleet", headers=bearer(keys.service))
    assert fleet.status_code == 200
    bus: Bus = roster.app.state.roster.bus
    records = await bus.request(
        bus.subjects.ops_fleet_records,
        FleetListRequest(fleet="pinecall"),
        FleetRecords,
        headers=bearer(keys.service),
    )
    assert [(f.name, f.environment) for f in records.fleets] == [("pinecall", "production")]
    snapshot = await bus.request(
        bus.subjects.ops_fleet_list,
        FleetListRequest(fleet="pinecall"),
        RosterSnapshot,
        headers=bearer(keys.service),
    )
    assert [w.worker for w in snapshot.fleets[0].workers] == ["pinecall/worker-a.1791067258"]


async def test_a_service_key_is_refused_the_operators_verbs(roster: Replica, keys: Keys) -> None:
    """A service key is not a person's: no cordon (HTTP or NATS), no revocation, nothing set."""
    from pinecall_contracts.fleet import CordonRequest, CordonSetting
    from pinecall_servicekit.bus import Bus
    from pinecall_servicekit.errors import Forbidden

    await roster.post("/v1/fleet/heartbeat", json=heartbeat(), headers=bearer(keys.production))
    refused = await roster.post(
        "/v1/ops/fleet/pinecall/worker-a/cordon", headers=bearer(keys.service)
    )
    assert refused.status_code == 403
    assert refused.headers["content-type"].startswith("application/problem+json")
    assert refused.json()["detail"] == "a service key cannot do this (needs operator)"
    revoke = await roster.post(
        f"/v1/ops/keys/{keys.production_id}/revoke", headers=bearer(keys.service)
    )
    assert revoke.status_code == 403
    bus: Bus = roster.app.state.roster.bus
    with pytest.raises(Forbidden, match="a service key cannot do this"):
        await bus.request(
            bus.subjects.ops_fleet_cordon,
            CordonRequest(worker="pinecall/worker-a"),
            CordonSetting,
            headers=bearer(keys.service),
        )
    reply = await roster.post(
        "/v1/fleet/heartbeat", json=heartbeat(), headers=bearer(keys.production)
    )
    assert reply.json()["cordoned"] is False
    still = await roster.post(
        "/v1/fleet/heartbeat", json=heartbeat(), headers=bearer(keys.production)
    )
    assert still.status_code == 200  # the fleet key was not revoked


async def test_wanted_counts_the_key_fleets_scaled_workers(roster: Replica, keys: Keys) -> None:
    for host, active in (("core-0", 2), ("scaled-a", 20), ("scaled-b", 4)):
        seats = 2 if host.startswith("core") else 32
        await roster.post(
            "/v1/fleet/heartbeat",
            headers=bearer(keys.production),
            json=heartbeat(host, active=active, seats=seats),
        )
    r = await roster.get(
        "/v1/fleet/wanted",
        params={"scaled": "scaled", "seats": 32, "most": 35},
        headers=bearer(keys.production),
    )
    assert r.status_code == 200
    assert r.json() == {
        "type": "fleet.wanted.v1",
        "fleet": "pinecall",
        "wanted": 2,
        "active": 24,
        "seats": 64,
    }
    # what KEDA was told is on the dashboard: wanted beside the scaled workers running
    text = (await roster.get("/metrics")).text
    assert 'pinecall_scaled_workers{fleet="pinecall",what="wanted"} 2.0' in text
    assert 'pinecall_scaled_workers{fleet="pinecall",what="running"} 2.0' in text


@pytest.mark.parametrize("params", [{}, {"scaled": "scaled"}, {"seats": 32}])
async def test_wanted_without_scaled_and_seats_is_400(
    roster: Replica, keys: Keys, params: dict[str, object]
) -> None:
    """Both are required, and the schema says so."""
    r = await roster.get("/v1/fleet/wanted", params=params, headers=bearer(keys.production))
    assert r.status_code == 400
    assert r.headers["content-type"].startswith("application/problem+json")


async def test_metrics_name_each_worker_state_and_the_fleet_totals(
    roster: Replica, keys: Keys
) -> None:
    await roster.post(
        "/v1/fleet/heartbeat",
        headers=bearer(keys.production),
        json=heartbeat(
            active=3,
            minute={"ended": 1, "failed": 0, "errors": 0, "turns": 9, "first_audio_p95_s": 1.25},
        ),
    )
    text = (await roster.get("/metrics")).text
    worker = 'worker="pinecall/worker-a.1791067258"'
    assert f'pinecall_worker_state{{fleet="pinecall",state="accepting",{worker}}} 1.0' in text
    assert f'pinecall_worker_first_audio_p95_seconds{{fleet="pinecall",{worker}}} 1.25' in text
    assert 'pinecall_fleet{fleet="pinecall",what="seats_free"} 5.0' in text
    assert 'pinecall_fleet{fleet="pinecall",what="calls"} 3.0' in text
    # the registry's names and labels, each request timed by its route's template
    assert unregistered(text, "roster") == []
    assert (
        'pinecall_http_request_duration_seconds_count{method="POST",route="/v1/fleet/heartbeat",'
        'service="roster",status="2xx"} 1.0'
    ) in text


async def test_health_readiness_and_openapi(roster: Replica) -> None:
    assert (await roster.get("/healthz")).json() == {"status": "ok"}
    ready = await roster.get("/readyz")
    assert ready.status_code == 200
    assert ready.json() == {
        "ready": True,
        "checks": {"postgres": True, "nats": True, "cordons": True},
    }
    paths = (await roster.get("/schema/openapi.json")).json()["paths"]
    assert {"/v1/fleet/heartbeat", "/v1/ops/fleet", "/v1/fleet/wanted"} <= set(paths)
    refused = paths["/v1/fleet/heartbeat"]["post"]["responses"]["401"]["content"]
    assert list(refused) == ["application/problem+json"]
    # the bodies are decoded by a DTO (servicekit.body), their schemas still the contracts'
    bodies = {
        path: paths[path]["post"]["requestBody"]["content"]["application/json"]["schema"]
        for path in ("/v1/fleet/heartbeat", "/v1/ops/fleet/{fleet_name}/{worker}/cordon")
    }
    assert bodies == {
        "/v1/fleet/heartbeat": {"$ref": "#/components/schemas/WorkerHeartbeat"},
        # optional: left out, never null (servicekit.openapi)
        "/v1/ops/fleet/{fleet_name}/{worker}/cordon": {
            "$ref": "#/components/schemas/CordonRequest"
        },
    }


async def test_a_revoked_key_is_refused_at_once(roster: Replica, keys: Keys) -> None:
    ok = await roster.post("/v1/fleet/heartbeat", json=heartbeat(), headers=bearer(keys.production))
    assert ok.status_code == 200
    r = await roster.post(
        f"/v1/ops/keys/{keys.production_id}/revoke", headers=bearer(keys.operator)
    )
    assert r.status_code == 200
    assert r.json()["revoked_at"] is not None
    refused = await roster.post(
        "/v1/fleet/heartbeat", json=heartbeat(), headers=bearer(keys.production)
    )
    assert refused.status_code == 401
    assert refused.json()["detail"] == "revoked key"
