"""A column added to call-log's tables while its replicas serve (a release's expand step,
``deploy/README.md``: migrations first, then the new release) changes no answer of theirs.

psycopg prepares a statement on its fifth run on a connection; a prepared ``SELECT *`` or
``RETURNING *`` then fails with "cached plan must not change result type" once the table has
another column, on that connection until it is made anew. A probe found every open a 500 after an
``ALTER TABLE … ADD COLUMN``: the one-statement paths (issue 20) name their columns now."""

from __future__ import annotations

import msgspec
import psycopg

from pinecall_call_log.app import create_app
from pinecall_call_log.settings import CallLogSettings
from pinecall_testkit.call_log import Keys, bearer, opening, running

TOOL = {"id": "tc_1", "name": "lookup", "arguments": {}, "timeout_s": 0.05}


async def test_a_column_added_under_a_serving_replica_changes_no_answer(
    call_log_settings: CallLogSettings, keys: Keys, database_url: str
) -> None:
    one_connection = msgspec.structs.replace(call_log_settings, db_pool_size=1)
    auth = bearer(keys.production)

    async def call_whole(n: int) -> list[int]:
        """Open, ask a tool nobody answers, end and seal call n: each answer's status."""
        call = f"call_{n}"
        return [
            (await replica.post("/v1/calls", json=opening(call), headers=auth)).status_code,
            (await replica.post(f"/v1/calls/{call}/tools", json=TOOL, headers=auth)).status_code,
            (
                await replica.post(
                    f"/v1/calls/{call}/end", json={"outcome": "completed"}, headers=auth
                )
            ).status_code,
            (await replica.post(f"/v1/calls/{call}/seal", headers=auth)).status_code,
        ]

    async with running(create_app(one_connection)) as replica:
        for n in range(6):  # each statement past psycopg's prepare threshold (5) on the one
            assert await call_whole(n) == [200, 200, 200, 200]
        with psycopg.connect(database_url, autocommit=True) as expand:
            for table in ("calls", "entries", "tool_calls", "agent_versions"):
                expand.execute(f"ALTER TABLE calllog.{table} ADD COLUMN added_later text")
        for n in range(6, 9):
            assert await call_whole(n) == [200, 200, 200, 200]
        log = await replica.get("/v1/calls/call_8/entries", headers=bearer(keys.operator))
        assert [e["kind"] for e in log.json()["entries"]] == [
            "call.started",
            "tool.call",
            "tool.result",
            "call.ended",
            "call.sealed",
        ]
