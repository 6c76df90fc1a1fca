"""What ``worker_calls.py --record`` stands on: two agents that differ only in ``record``, a bucket
for the recordings, and the comparison of the two runs (issue 19, acceptance 4; seed 000, "Where a
call is recorded": at six calls the worker went from 1.78 to 2.31 cores when the session
recorded, and the recorder from 0.60 to 0). Not a test, never imported by production code.

The bucket is moto's S3 server on loopback (``pinecall_loadlab.vendors.s3``) in a thread of the
benchmark's process, so its CPU is not the worker's; the worker uploads to it as it would to
a real bucket (multipart, the open part again every 5 s).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from benchkit import Bench, log

from pinecall_clients.calllog import CallLogClient
from pinecall_contracts.agents import AgentDefinition
from pinecall_loadlab.vendors.s3 import S3Fake

BUCKET = "recordings"
ORG = "org_acme"
"""The org of ``pinecall_testkit.worker.offer_call``'s offers."""
PROMPT = "You answer briefly."
AGENTS = {
    False: AgentDefinition(name="plain", prompt=PROMPT),
    True: AgentDefinition(name="recorded", prompt=PROMPT, record=True),
}
"""Recording off and on: the same agent otherwise (no greeting, the worker's model)."""


@contextlib.contextmanager
def bucket() -> Iterator[dict[str, str]]:
    """moto's S3 server with :data:`BUCKET`; the worker's ``PINECALL_RECORDINGS_*`` for it."""
    with S3Fake.started(buckets=[BUCKET]) as s3:
        log(f"recordings' bucket: {s3.url}/{BUCKET} (moto, in this process)")
        yield {
            "PINECALL_RECORDINGS_BUCKET": BUCKET,
            "PINECALL_RECORDINGS_ENDPOINT": s3.url,
            "PINECALL_RECORDINGS_ACCESS_KEY_ID": "bench",
            "PINECALL_RECORDINGS_SECRET_ACCESS_KEY": "bench",
        }


async def define_agents(bench: Bench, call_log: str) -> None:
    """Both of :data:`AGENTS` on call-log, with a production app key of the run's own."""
    if not bench.app_key:
        bench.app_key = bench.cli(
            "keys", "create", "--kind", "app", "--name", "bench", "--environment", "production"
        )
    async with CallLogClient(call_log, bench.app_key) as client:
        for definition in AGENTS.values():
            await client.put_agent(definition, org=ORG)


def recorded_ok(entries: list[dict[str, Any]], failed: list[dict[str, Any]]) -> bool:
    """Whether a recording call's log says its recording was completed (``call.recording``)
    and none failed: a run whose recordings failed measured no recording."""
    return len(entries) == 1 and not failed


def compare(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per step, the worker's cores and cores a call without recording and with, and their
    ratio (with ÷ without)."""
    out = []
    for n in sorted({r["calls"] for r in rows}):
        off = next((r for r in rows if r["calls"] == n and not r["recorded"]), None)
        on = next((r for r in rows if r["calls"] == n and r["recorded"]), None)
        if off is None or on is None:
            continue
        out.append(
            {
                "calls": n,
                "worker_cores": [off["worker_cores"], on["worker_cores"]],
                "cores_per_call": [off["cores_per_call"], on["cores_per_call"]],
                "ratio": round(on["worker_cores"] / off["worker_cores"], 2)
                if off["worker_cores"]
                else None,
                "recordings_completed": on["recordings_completed"],
            }
        )
    return out


def lines(comparison: list[dict[str, Any]]) -> list[str]:
    """The comparison for the table."""
    out = ["", "recording (worker cores, cores a call: without → with, ratio of cores):"]
    for c in comparison:
        (off, on), (a, b) = c["worker_cores"], c["cores_per_call"]
        out.append(
            f"{c['calls']:>5} calls: {off} → {on} cores, {a} → {b} a call, ratio {c['ratio']} "
            f"({c['recordings_completed']}/{c['calls']} recordings completed)"
        )
    return out
