"""Two roster replicas on real NATS and Postgres (issue 2, acceptance 3).

Each wait below awaits the replica's own change notice (a heartbeat heard, a cordon applied, a
revocation heard), never a sleep; the timeouts only bound a failure.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

import pytest
import sqlalchemy as sa

from pinecall_contracts.base import decode
from pinecall_contracts.fleet import WorkerHeartbeat
from pinecall_contracts.ids import WorkerKey
from pinecall_roster.service import RosterService
from pinecall_servicekit.errors import Unauthorized
from pinecall_testkit.roster import Keys, Replica, bearer, heartbeat

Start = Callable[[], AbstractAsyncContextManager[Replica]]
WORKER = "pinecall/worker-a.1791067258"


def service(replica: Replica) -> RosterService:
    roster: RosterService = replica.app.state.roster
    return roster


async def fleet_rows(replica: Replica, keys: Keys) -> dict[str, dict]:
    r = await replica.get(
        "/v1/ops/fleet", params={"fleet": "pinecall"}, headers=bearer(keys.operator)
    )
    return {w["worker"]: w for w in r.json()["fleets"][0]["workers"]}


async def test_a_heartbeat_posted_to_one_is_counted_by_the_other(
    replica: Start, keys: Keys
) -> None:
    async with replica() as a, replica() as b:
        r = await a.post(
            "/v1/fleet/heartbeat", json=heartbeat(active=5), headers=bearer(keys.production)
        )
        assert r.status_code == 200
        await service(b).changes.wait_for(
            lambda: bool(service(b).view("pinecall").workers), timeout=5
        )
        row = (await fleet_rows(b, keys))[WORKER]
        assert (row["state"], row["active"], row["seats"]) == ("accepting", 5, 8)


async def test_a_cordon_set_on_one_stands_on_the_other_and_survives_its_restart(
    replica: Start, keys: Keys
) -> None:
    key = WorkerKey("pinecall/worker-a")
    async with replica() as a:
        async with replica() as b:
            r = await a.post(  # a worker not started yet: forced
                "/v1/ops/fleet/pinecall/worker-a/cordon",
                json={"reason": "slow", "force": True},
                headers=bearer(keys.operator),
            )
            assert r.status_code == 200
            assert r.json()["cordoned"] is True
            book = service(b).cordons
            await book.changes.wait_for(lambda: book.is_cordoned(key), timeout=5)
            reply = await b.post(
                "/v1/fleet/heartbeat", json=heartbeat(), headers=bearer(keys.production)
            )
            assert reply.json()["cordoned"] is True
        # b stopped; a new replica starts with nothing in memory but the bucket
        async with replica() as b_again:
            assert service(b_again).cordons.is_cordoned(key)
            reply = await b_again.post(
                "/v1/fleet/heartbeat",
                headers=bearer(keys.production),
                json=heartbeat(start=1791069999),
            )  # restarted worker too
            assert reply.json()["cordoned"] is True
            row = (await fleet_rows(b_again, keys))["pinecall/worker-a.1791069999"]
            assert row["state"] == "cordoned"
            # lifted on the new replica: the old one sees the newest setting
            await b_again.post(
                "/v1/ops/fleet/pinecall/worker-a/uncordon", headers=bearer(keys.operator)
            )
            book = service(a).cordons
            await book.changes.wait_for(lambda: not book.is_cordoned(key), timeout=5)


async def test_a_key_revoked_on_one_is_refused_by_the_other_before_its_cache_expires(
    replica: Start, keys: Keys
) -> None:
    async with replica() as a, replica() as b:
        ok = await b.post("/v1/fleet/heartbeat", json=heartbeat(), headers=bearer(keys.production))
        assert ok.status_code == 200
        ring = service(b).keyring
        assert ring.remembers(keys.production_id)  # b would accept it from memory for 5 s
        r = await a.post(f"/v1/ops/keys/{keys.production_id}/revoke", headers=bearer(keys.operator))
        assert r.status_code == 200
        # well inside the 5 s cache: only the revocation said on NATS can make b forget it
        await ring.changes.wait_for(lambda: not ring.remembers(keys.production_id), timeout=1)
        refused = await b.post(
            "/v1/fleet/heartbeat", json=heartbeat(), headers=bearer(keys.production)
        )
        assert refused.status_code == 401
        assert refused.json()["detail"] == "revoked key"


async def test_a_sandbox_fleet_key_is_refused_for_the_production_fleet(
    replica: Start, keys: Keys
) -> None:
    async with replica() as a, replica() as b:
        for r in (a, b):
            refused = await r.post(
                "/v1/fleet/heartbeat", json=heartbeat(), headers=bearer(keys.sandbox)
            )
            assert refused.status_code == 403
        ok = await a.post(
            "/v1/fleet/heartbeat",
            json=heartbeat(fleet="pinecall-sandbox"),
            headers=bearer(keys.sandbox),
        )
        assert ok.status_code == 200
        assert all(not v.workers for v in service(b).snapshot("pinecall").fleets)


async def test_the_newest_registration_replaces_a_dead_one_on_every_replica(
    replica: Start, keys: Keys
) -> None:
    async with replica() as a, replica() as b:
        await a.post(
            "/v1/fleet/heartbeat",
            json=heartbeat(start=100, active=4),
            headers=bearer(keys.production),
        )
        await b.post(
            "/v1/fleet/heartbeat",
            json=heartbeat(start=200, active=0),
            headers=bearer(keys.production),
        )
        await service(a).changes.wait_for(
            lambda: (
                [w.worker for w in service(a).view("pinecall").workers] == ["pinecall/worker-a.200"]
            ),
            timeout=5,
        )
        # a late beat of the dead process changes nothing on either
        await a.post(
            "/v1/fleet/heartbeat",
            json=heartbeat(start=100, active=4),
            headers=bearer(keys.production),
        )
        for r in (a, b):
            assert list(await fleet_rows(r, keys)) == ["pinecall/worker-a.200"]


async def test_requests_missing_a_key_share_one_read_of_it_and_a_revoked_key_is_not_kept(
    replica: Start, keys: Keys
) -> None:
    async with replica() as a:
        ring = service(a).keyring
        engine = service(a).store.engine.sync_engine
        read: list[str] = []

        def executed(conn: object, cursor: object, statement: str, *rest: object) -> None:
            if "roster.keys" in statement:
                read.append(statement)

        sa.event.listen(engine, "before_cursor_execute", executed)
        try:
            ring.forget(keys.production_id)  # its 5 s ran out
            found = await asyncio.gather(
                *[ring.verify(keys.production, kinds=("fleet",)) for _ in range(20)]
            )
            assert {k.id for k in found} == {keys.production_id}
            assert len(read) == 1, "each request missing the key read it"
            assert ring.remembers(keys.production_id)
            # a secret that is not the key's is refused, whatever was remembered of the key
            wrong = keys.production[:-4] + ("AAAA" if keys.production[-4:] != "AAAA" else "BBBB")
            with pytest.raises(Unauthorized):
                await ring.verify(wrong, kinds=("fleet",))
            r = await a.post(
                f"/v1/ops/keys/{keys.production_id}/revoke", headers=bearer(keys.operator)
            )
            assert r.status_code == 200
            assert not ring.remembers(keys.production_id)
            with pytest.raises(Unauthorized):
                await ring.verify(keys.production, kinds=("fleet",))
            assert not ring.remembers(keys.production_id), "a revoked key was remembered"
        finally:
            sa.event.remove(engine, "before_cursor_execute", executed)


async def test_heartbeats_cross_a_rolling_deploy_in_both_directions(
    replica: Start, keys: Keys
) -> None:
    """A replica of the release before the fleet was a token of its heartbeat subject
    (``<ns>.fleet.heartbeat.<worker>``, subscribed as ``….*``) still hears this release's
    heartbeats, and this release hears its: otherwise, mid-deploy, a worker heard by one
    release's replica would look gone to the other's (its dispatcher's offers included)."""
    async with replica() as a:
        bus = service(a).bus
        older = f"{bus.subjects.namespace}.fleet.heartbeat.*"
        heard: asyncio.Queue[WorkerHeartbeat] = asyncio.Queue()
        await bus.subscribe(older, WorkerHeartbeat, heard.put)
        r = await a.post(
            "/v1/fleet/heartbeat", json=heartbeat(active=5), headers=bearer(keys.production)
        )
        assert r.status_code == 200
        async with asyncio.timeout(5):
            told = await heard.get()
        assert (told.worker, told.active) == (WORKER, 5)

        other = "pinecall/worker-b.1791067258"
        beat = decode(json.dumps(heartbeat("worker-b", active=2)).encode(), WorkerHeartbeat)
        await bus.publish(bus.subjects.heartbeat_before(other), beat)  # an older replica's
        await service(a).changes.wait_for(
            lambda: any(w.worker == other for w in service(a).view("pinecall").workers),
            timeout=5,
        )
