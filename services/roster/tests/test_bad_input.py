"""Every endpoint refuses bad input with a problem detail, and nothing is recorded."""

from __future__ import annotations

import pytest

from pinecall_testkit.roster import Keys, Replica, bearer, heartbeat

PROBLEM = "application/problem+json"


def assert_problem(r, status: int, code: str | None = None) -> dict:  # type: ignore[no-untyped-def]
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith(PROBLEM)
    body = r.json()
    assert body["status"] == status
    assert body["title"]
    if code:
        assert body["code"] == code
    return body


async def workers_heard(roster: Replica, keys: Keys) -> list[str]:
    snapshot = (await roster.get("/v1/ops/fleet", headers=bearer(keys.operator))).json()
    return [w["worker"] for f in snapshot["fleets"] for w in f["workers"]]


async def cordoned(roster: Replica, keys: Keys) -> list[str]:
    snapshot = (await roster.get("/v1/ops/fleet", headers=bearer(keys.operator))).json()
    return [w["worker"] for f in snapshot["fleets"] for w in f["workers"] if w["cordoned"]]


# POST /v1/fleet/heartbeat
async def test_heartbeat_malformed_json(roster: Replica, keys: Keys) -> None:
    r = await roster.post(
        "/v1/fleet/heartbeat",
        content=b'{"fleet": "pinecall",',
        headers=bearer(keys.production) | {"content-type": "application/json"},
    )
    assert_problem(r, 400, "bad_request")
    assert await workers_heard(roster, keys) == []


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("active", "three"),
        ("max_jobs", -1),
        ("load", None),
        ("draining", "maybe"),
        ("minute", {"ended": "x"}),
    ],
)
async def test_heartbeat_wrong_types(
    roster: Replica, keys: Keys, field: str, value: object
) -> None:
    r = await roster.post(
        "/v1/fleet/heartbeat", json=heartbeat() | {field: value}, headers=bearer(keys.production)
    )
    body = assert_problem(r, 400, "bad_request")
    assert field in (body.get("detail") or "") + str(body.get("errors"))
    assert await workers_heard(roster, keys) == []


async def test_heartbeat_missing_field(roster: Replica, keys: Keys) -> None:
    body = heartbeat()
    del body["max_jobs"]
    r = await roster.post("/v1/fleet/heartbeat", json=body, headers=bearer(keys.production))
    assert_problem(r, 400, "bad_request")
    assert await workers_heard(roster, keys) == []


async def test_heartbeat_unknown_fleet(roster: Replica, keys: Keys) -> None:
    r = await roster.post(
        "/v1/fleet/heartbeat", json=heartbeat(fleet="nobody"), headers=bearer(keys.production)
    )
    assert "unknown fleet" in assert_problem(r, 422, "unprocessable")["detail"]
    assert await workers_heard(roster, keys) == []


async def test_heartbeat_name_of_another_fleet(roster: Replica, keys: Keys) -> None:
    r = await roster.post(
        "/v1/fleet/heartbeat",
        headers=bearer(keys.production),
        json=heartbeat() | {"fleet": "pinecall-sandbox"},
    )
    assert_problem(r, 422, "unprocessable")
    assert await workers_heard(roster, keys) == []


@pytest.mark.parametrize("which", ["none", "garbage", "unknown", "operator", "app"])
async def test_heartbeat_without_a_fleet_key(roster: Replica, keys: Keys, which: str) -> None:
    headers = {
        "none": {},
        "garbage": {"Authorization": "Basic dXNlcjpwYXNz"},
        "unknown": bearer("pck_000000000000_" + "x" * 43),
        "operator": bearer(keys.operator),
        "app": bearer(keys.app),
    }[which]
    r = await roster.post("/v1/fleet/heartbeat", json=heartbeat(), headers=headers)
    assert_problem(r, 403 if which in ("operator", "app") else 401)
    assert await workers_heard(roster, keys) == []


async def test_heartbeat_sandbox_key_for_production_fleet(roster: Replica, keys: Keys) -> None:
    r = await roster.post("/v1/fleet/heartbeat", json=heartbeat(), headers=bearer(keys.sandbox))
    assert_problem(r, 403, "forbidden")
    assert await workers_heard(roster, keys) == []


# GET /v1/fleet/wanted
@pytest.mark.parametrize(
    ("params", "status"),
    [
        ({"scaled": "scaled", "seats": "many"}, 400),
        ({"scaled": "scaled", "seats": 0}, 400),
        ({"scaled": "scaled", "seats": 32, "most": -1}, 400),
        ({"seats": 32}, 400),  # scaled is required
        ({"scaled": "pinecall-sandbox/s", "seats": 32}, 422),  # another fleet's: never matches
    ],
)
async def test_wanted_bad_query(roster: Replica, keys: Keys, params: dict, status: int) -> None:
    r = await roster.get("/v1/fleet/wanted", params=params, headers=bearer(keys.production))
    assert_problem(r, status)


@pytest.mark.parametrize(("key", "status"), [(None, 401), ("operator", 403)])
async def test_wanted_needs_a_fleet_key(
    roster: Replica, keys: Keys, key: str | None, status: int
) -> None:
    headers = bearer(getattr(keys, key)) if key else {}
    r = await roster.get("/v1/fleet/wanted", params={"scaled": "s", "seats": 32}, headers=headers)
    assert_problem(r, status)


# GET /v1/ops/fleet, /v1/ops/fleets
@pytest.mark.parametrize("path", ["/v1/ops/fleet", "/v1/ops/fleets"])
@pytest.mark.parametrize(("key", "status"), [(None, 401), ("production", 403), ("app", 403)])
async def test_ops_reads_need_an_operator_key(
    roster: Replica, keys: Keys, path: str, key: str | None, status: int
) -> None:
    headers = bearer(getattr(keys, key)) if key else {}
    assert_problem(await roster.get(path, headers=headers), status)


async def test_ops_fleet_of_an_unknown_fleet_is_empty(roster: Replica, keys: Keys) -> None:
    r = await roster.get("/v1/ops/fleet", params={"fleet": "nobody"}, headers=bearer(keys.operator))
    assert r.status_code == 200
    assert r.json()["fleets"] == []


# POST /v1/ops/fleet/{worker}/cordon and uncordon
async def test_cordon_malformed_body(roster: Replica, keys: Keys) -> None:
    r = await roster.post(
        "/v1/ops/fleet/pinecall/worker-a/cordon",
        content=b"{nope",
        headers=bearer(keys.operator) | {"content-type": "application/json"},
    )
    assert_problem(r, 400, "bad_request")
    r = await roster.post(
        "/v1/ops/fleet/pinecall/worker-a/cordon",
        json={"cordoned": "yes"},
        headers=bearer(keys.operator),
    )
    assert_problem(r, 400, "bad_request")


async def test_cordon_unknown_fleet_and_malformed_worker(roster: Replica, keys: Keys) -> None:
    r = await roster.post("/v1/ops/fleet/nobody/worker-a/cordon", headers=bearer(keys.operator))
    assert "no fleet 'nobody'" in assert_problem(r, 404, "not_found")["detail"]
    r = await roster.post("/v1/ops/fleet/Pine!call/worker-a/cordon", headers=bearer(keys.operator))
    assert_problem(r, 400, "bad_request")
    assert service_cordons(roster) == []


@pytest.mark.parametrize("verb", ["cordon", "uncordon"])
@pytest.mark.parametrize(("key", "status"), [(None, 401), ("production", 403)])
async def test_cordon_needs_an_operator_key(
    roster: Replica, keys: Keys, verb: str, key: str | None, status: int
) -> None:
    await roster.post("/v1/fleet/heartbeat", json=heartbeat(), headers=bearer(keys.production))
    headers = bearer(getattr(keys, key)) if key else {}
    assert_problem(
        await roster.post(f"/v1/ops/fleet/pinecall/worker-a/{verb}", headers=headers), status
    )
    assert await cordoned(roster, keys) == []


# POST /v1/ops/keys/{key}/revoke
async def test_revoke_unknown_key(roster: Replica, keys: Keys) -> None:
    assert_problem(
        await roster.post("/v1/ops/keys/000000000000/revoke", headers=bearer(keys.operator)),
        404,
        "not_found",
    )


@pytest.mark.parametrize(("key", "status"), [(None, 401), ("production", 403)])
async def test_revoke_needs_an_operator_key(
    roster: Replica, keys: Keys, key: str | None, status: int
) -> None:
    headers = bearer(getattr(keys, key)) if key else {}
    r = await roster.post(f"/v1/ops/keys/{keys.production_id}/revoke", headers=headers)
    assert_problem(r, status)
    ok = await roster.post("/v1/fleet/heartbeat", json=heartbeat(), headers=bearer(keys.production))
    assert ok.status_code == 200  # the key still works: nothing was revoked


# anything else
async def test_unknown_route_and_method(roster: Replica) -> None:
    assert_problem(await roster.get("/v1/nothing"), 404, "not_found")
    assert_problem(await roster.get("/v1/fleet/heartbeat"), 405, "method_not_allowed")


# what a worker could say that no worker truly says
@pytest.mark.parametrize(
    ("change", "status", "words"),
    [
        ({"worker": "pinecall/worker-a.1791067258\n"}, 422, "start '1791067258\\n'"),
        ({"worker": "worker-a"}, 422, "not <fleet>/<worker>.<start>"),
        ({"worker": "pinecall/w.1.1791067258"}, 422, "worker part 'w.1' holds a '.'"),
        ({"worker": "pinecall/w.01791067258"}, 422, "without a leading zero"),
        ({"worker": "pinecall/overflow.1791067258"}, 422, "the overflow's name"),
        ({"agent_name": "pinecall/w.1.1791067258"}, 422, "agent_name: not a worker name"),
        ({"active": "2"}, 400, "active"),
        ({"load": 5.0}, 422, "active ÷ max_jobs"),
        ({"max_jobs": 0, "active": 0, "load": 0.0}, 400, "max_jobs"),
        ({"minute": {"ended": 1, "failed": 2}}, 422, "failed"),
        ({"worker": "pinecall/worker-a.999999999999", "agent_name": None}, 422, "future"),
        ({"version": "x" * 201}, 400, "version"),
    ],
)
async def test_heartbeat_that_no_worker_says(
    roster: Replica, keys: Keys, change: dict, status: int, words: str
) -> None:
    r = await roster.post(
        "/v1/fleet/heartbeat", json=heartbeat() | change, headers=bearer(keys.production)
    )
    body = assert_problem(r, status)
    assert words in body["detail"] + str(body.get("errors"))
    assert await workers_heard(roster, keys) == []


async def test_a_superseded_registration_is_told_so_and_not_counted(
    roster: Replica, keys: Keys
) -> None:
    ok = await roster.post(
        "/v1/fleet/heartbeat", json=heartbeat(start=200), headers=bearer(keys.production)
    )
    assert ok.status_code == 200
    late = await roster.post(
        "/v1/fleet/heartbeat", json=heartbeat(start=100, active=3), headers=bearer(keys.production)
    )
    assert_problem(late, 409, "conflict")
    assert await workers_heard(roster, keys) == ["pinecall/worker-a.200"]


async def test_cordon_reason_too_long_and_worker_with_a_newline(
    roster: Replica, keys: Keys
) -> None:
    r = await roster.post(
        "/v1/ops/fleet/pinecall/worker-a/cordon",
        json={"reason": "x" * 501},
        headers=bearer(keys.operator),
    )
    assert_problem(r, 400, "bad_request")
    r = await roster.post(
        "/v1/ops/fleet/pinecall/worker-a%0A/cordon", headers=bearer(keys.operator)
    )
    assert_problem(r, 400, "bad_request")
    assert service_cordons(roster) == []  # nothing was cordoned


async def test_a_cordon_of_a_worker_nobody_heard_is_404_unless_forced(
    roster: Replica, keys: Keys
) -> None:
    """A typo (``pinecall/wokrer-a``) would stand as a cordon of nobody while the worker meant
    goes on taking calls: refused, and nothing stored; ``force`` cordons one not started yet."""
    for verb in ("cordon", "uncordon"):
        r = await roster.post(
            f"/v1/ops/fleet/pinecall/wokrer-a/{verb}", headers=bearer(keys.operator)
        )
        assert_problem(r, 404, "not_found")
        assert "no worker pinecall/wokrer-a was heard in the last hour" in r.json()["detail"]
    assert service_cordons(roster) == []
    r = await roster.post(
        "/v1/ops/fleet/pinecall/worker-b/cordon",
        json={"force": True},
        headers=bearer(keys.operator),
    )
    assert r.status_code == 200
    # a stored cordon is known: lifting it needs no force, heard or not
    r = await roster.post("/v1/ops/fleet/pinecall/worker-b/uncordon", headers=bearer(keys.operator))
    assert r.status_code == 200
    assert service_cordons(roster) == [("pinecall/worker-b", False)]


def service_cordons(roster: Replica) -> list[tuple[str, bool]]:
    return [(s.worker, s.cordoned) for s in roster.app.state.roster.cordons.settings()]


async def test_litestars_own_refusals_have_the_shape_of_ours(roster: Replica, keys: Keys) -> None:
    """A body over Litestar's limit, a route or a method that is not there: each a problem
    detail with its status's title, its code, and what was wrong as the detail."""
    auth = bearer(keys.production) | {"content-type": "application/json"}
    big = await roster.post("/v1/fleet/heartbeat", content=b" " * 11_000_000, headers=auth)
    body = assert_problem(big, 413, "too_large")
    assert (body["title"], bool(body["detail"])) == ("Too large", True)
    body = assert_problem(await roster.get("/v1/nothing"), 404, "not_found")
    assert body["title"] == "Not found"
    body = assert_problem(await roster.delete("/v1/fleet/heartbeat"), 405, "method_not_allowed")
    assert body["title"] == "Method not allowed"
    assert await workers_heard(roster, keys) == []


async def test_a_cordon_naming_a_start_its_worker_is_not_heard_as_is_404_unless_forced(
    roster: Replica, keys: Keys
) -> None:
    """``pinecall/worker-a.123`` (a start that never ran) names nobody, like a typo: it must not
    cordon the worker-a that is heard as ``pinecall/worker-a.1791067258``."""
    r = await roster.post("/v1/fleet/heartbeat", json=heartbeat(), headers=bearer(keys.production))
    assert r.status_code == 200
    for verb in ("cordon", "uncordon"):
        r = await roster.post(
            f"/v1/ops/fleet/pinecall/worker-a.123/{verb}", headers=bearer(keys.operator)
        )
        assert_problem(r, 404, "not_found")
        assert r.json()["detail"] == (
            "no worker pinecall/worker-a.123 was heard in the last hour: pinecall/worker-a is "
            "heard as pinecall/worker-a.1791067258 (name that, or pinecall/worker-a for "
            "whichever start runs)"
        )
    assert service_cordons(roster) == []
    for named in ("pinecall/worker-a.1791067258", "pinecall/worker-a"):
        r = await roster.post(f"/v1/ops/fleet/{named}/cordon", headers=bearer(keys.operator))
        assert r.status_code == 200, r.text
    r = await roster.post(  # forced: said as meant (a worker not started yet)
        "/v1/ops/fleet/pinecall/worker-a.123/cordon",
        json={"cordoned": False, "force": True},
        headers=bearer(keys.operator),
    )
    assert r.status_code == 200, r.text
    assert service_cordons(roster) == [("pinecall/worker-a", False)]
