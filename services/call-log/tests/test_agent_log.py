"""The agent log and callbacks (seed 000, "Full, at the endpoint"; seed 002, "A process that
leaves on purpose"): fleet.full, agent.draining and callback.requested in order, per environment,
one call back per call."""

from __future__ import annotations

import asyncio

from pinecall_call_log.testing import Keys, Replica, bearer

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
