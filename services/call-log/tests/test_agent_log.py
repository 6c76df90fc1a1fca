"""The agent log and callbacks (seed 000, "Full, at the endpoint"; seed 002, "A process that
leaves on purpose"): fleet.full, agent.draining and callback.requested in order, per environment,
one call back per call."""

from __future__ import annotations

import asyncio

from pinecall_testkit.call_log import Keys, Replica, bearer, opening

LOG = "/v1/agents/support-bot/log"


async def test_entries_land_in_order_on_the_agent_log_of_the_key_environment(
    call_log: Replica, keys: Keys
) -> None:
    fleet, app = bearer(keys.production), bearer(keys.app)
    full = await call_log.post(
        LOG, json={"kind": "fleet.full", "data": {"fleet": "pinecall"}}, headers=fleet
    )
    assert full.status_code == 200
    callback = await call_log.post(
        "/v1/callbacks",
        json={"agent": "support-bot", "number": "+15550100", "reason": "fleet full"},
        headers=app,
    )
    assert callback.json()["kind"] == "callback.requested"
    await call_log.post(
        LOG, json={"kind": "agent.draining", "data": {"handed": 2, "parked": 0}}, headers=fleet
    )
    await call_log.post(LOG, json={"kind": "fleet.full"}, headers=bearer(keys.sandbox))
    log = (await call_log.get(LOG, headers=app)).json()
    assert [e["kind"] for e in log["entries"]] == [
        "fleet.full",
        "callback.requested",
        "agent.draining",
    ]
    assert log["entries"][1]["data"] == {"number": "+15550100", "reason": "fleet full"}
    seqs = [e["seq"] for e in log["entries"]]
    assert seqs == sorted(seqs)
    after = (await call_log.get(LOG, params={"after": seqs[0]}, headers=app)).json()
    assert [e["seq"] for e in after["entries"]] == seqs[1:]
    sandbox = (await call_log.get(LOG, headers=bearer(keys.app_sandbox))).json()
    assert [e["kind"] for e in sandbox["entries"]] == ["fleet.full"]


async def test_one_call_back_per_call_even_asked_at_once_by_the_overflow_and_the_death_handler(
    call_log: Replica, keys: Keys
) -> None:
    """The overflow asks with its fleet key; the death handler (the dispatcher) with its operator
    key, naming the environment."""
    body = {"agent": "support-bot", "number": "+15550100", "reason": "drained", "call": "call_9"}
    overflow = {"headers": bearer(keys.production)}
    dispatcher = {"headers": bearer(keys.operator), "params": {"environment": "production"}}
    answers = await asyncio.gather(
        *[
            call_log.post("/v1/callbacks", json=body, **(overflow if n % 2 else dispatcher))  # type: ignore[arg-type]
            for n in range(6)
        ]
    )
    assert {r.status_code for r in answers} == {200}
    assert len({r.json()["seq"] for r in answers}) == 1
    log = (await call_log.get(LOG, headers=bearer(keys.app))).json()
    assert [e["kind"] for e in log["entries"]] == ["callback.requested"]
    sandbox = (await call_log.get(LOG, headers=bearer(keys.app_sandbox))).json()
    assert sandbox["entries"] == []


async def test_a_call_back_is_per_environment_and_of_the_calls_own_agent(
    call_log: Replica, keys: Keys
) -> None:
    """A sandbox key naming a production call is refused and takes nothing: production's own
    call back of it is written, not answered with another environment's. A call of another
    agent is refused; a call this log never held (a visitor refused before any call) is taken."""
    opened = await call_log.post(
        "/v1/calls", json=opening("call_p"), headers=bearer(keys.production)
    )
    assert opened.status_code == 200
    body = {"agent": "support-bot", "number": "+15550100", "call": "call_p"}
    r = await call_log.post("/v1/callbacks", json=body, headers=bearer(keys.app_sandbox))
    assert (r.status_code, r.json()["code"]) == (403, "forbidden")
    other = body | {"agent": "other-bot"}
    r = await call_log.post("/v1/callbacks", json=other, headers=bearer(keys.app))
    assert (r.status_code, r.json()["code"]) == (422, "unprocessable")
    r = await call_log.post("/v1/callbacks", json=body, headers=bearer(keys.app))
    assert r.status_code == 200
    assert r.json()["data"]["call"] == "call_p"
    # one call id in two environments, neither held here: one call back in each
    never = {"agent": "support-bot", "number": "+15550199", "call": "call_never"}
    for key in (keys.app, keys.app_sandbox):
        assert (
            await call_log.post("/v1/callbacks", json=never, headers=bearer(key))
        ).status_code == 200
    for key, calls in ((keys.app, ["call_p", "call_never"]), (keys.app_sandbox, ["call_never"])):
        log = (await call_log.get(LOG, headers=bearer(key))).json()
        assert [e["data"]["call"] for e in log["entries"]] == calls


async def test_an_operator_naming_no_environment_there_is_is_refused_and_writes_nothing(
    call_log: Replica, keys: Keys
) -> None:
    body = {"agent": "support-bot", "number": "+15550100"}
    for method, path, json in (
        ("POST", "/v1/callbacks", body),
        ("POST", LOG, {"kind": "fleet.full"}),
        ("GET", "/v1/calls", None),
        ("GET", LOG, None),
    ):
        r = await call_log.request(
            method, path, json=json, params={"environment": "bogus"}, headers=bearer(keys.operator)
        )
        assert (r.status_code, r.json()["code"]) == (422, "unprocessable"), (path, r.text)
    for key in (keys.app, keys.app_sandbox):
        assert (await call_log.get(LOG, headers=bearer(key))).json()["entries"] == []


async def test_an_operator_names_the_agent_logs_environment_and_a_key_reads_its_own(
    call_log: Replica, keys: Keys
) -> None:
    """A log is per environment: no default is right for an operator, who must say which; a
    fleet or app key's environment is its own."""
    fleet = bearer(keys.sandbox)
    assert (await call_log.post(LOG, json={"kind": "fleet.full"}, headers=fleet)).status_code == 200
    operator = bearer(keys.operator)
    for method, json in (("GET", None), ("POST", {"kind": "fleet.full"})):
        r = await call_log.request(method, LOG, json=json, headers=operator)
        assert (r.status_code, r.json()["code"]) == (422, "unprocessable"), r.text
        assert "?environment=production or ?environment=sandbox" in r.json()["detail"]
        assert r.json()["errors"][0]["key"] == "environment"
    named = await call_log.get(LOG, params={"environment": "sandbox"}, headers=operator)
    assert [e["kind"] for e in named.json()["entries"]] == ["fleet.full"]
    production = await call_log.get(LOG, params={"environment": "production"}, headers=operator)
    assert production.json()["entries"] == []
    own = await call_log.get(LOG, headers=bearer(keys.app_sandbox))
    assert [e["kind"] for e in own.json()["entries"]] == ["fleet.full"]


async def test_an_entry_with_a_key_is_written_once_per_agents_log(
    call_log: Replica, keys: Keys
) -> None:
    """A writer re-sending an entry after a crash (the dispatcher's follow-ups) names its key:
    the entries sent with one key, even at once, are one, answered alike; the same key on
    another agent's log, or another environment's, is another entry; a bad key is a problem
    and writes nothing."""
    service = {"headers": bearer(keys.service), "params": {"environment": "production"}}
    entry = {"kind": "callback.dialled", "data": {"callback": 3, "try": 1}, "key": "note-7"}
    answers = await asyncio.gather(*(call_log.post(LOG, json=entry, **service) for _ in range(6)))  # type: ignore[arg-type]
    assert {a.status_code for a in answers} == {200}
    assert len({a.json()["seq"] for a in answers}) == 1
    assert answers[0].json()["key"] == "note-7"
    other = await call_log.post("/v1/agents/sales-bot/log", json=entry, **service)  # type: ignore[arg-type]
    sandbox = await call_log.post(
        LOG, json=entry, headers=bearer(keys.service), params={"environment": "sandbox"}
    )
    assert len({answers[0].json()["seq"], other.json()["seq"], sandbox.json()["seq"]}) == 3
    bad = await call_log.post(LOG, json=entry | {"key": "has a space"}, **service)  # type: ignore[arg-type]
    assert bad.status_code == 400
    assert bad.headers["content-type"].startswith("application/problem+json")
    log = (await call_log.get(LOG, headers=bearer(keys.app))).json()
    assert [(e["kind"], e["key"]) for e in log["entries"]] == [("callback.dialled", "note-7")]
