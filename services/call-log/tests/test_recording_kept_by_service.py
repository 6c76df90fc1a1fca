"""What a service key may write to a call's log (issue 19, acceptance 2): the reaper keeps a dead
job's recording when the call got no sentence job, so it reads the call's entries and writes
``call.recording`` or ``call.recording_failed`` after the log's count, as a writer does; any
other kind from it is a 403 problem detail and nothing of its batch is written. Each recording
said is counted in ``pinecall_recordings_total{environment,outcome}`` once (not on a replay)."""

from __future__ import annotations

from typing import Any

import pytest

from pinecall_call_log.app import create_app
from pinecall_call_log.settings import CallLogSettings
from pinecall_testkit.call_log import Keys, Replica, bearer, entry, opening, running

KEPT = {
    "url": "s3://recordings/recordings/production/org_acme/call_1/answer.ogg",
    "seconds": 7.5,
    "bytes": 4096,
    "sha256": "0" * 64,
    "channels": ["caller", "agent"],
    "job": "answer",
    "complete": False,
}


def said(kind: str, data: dict[str, Any]) -> dict[str, Any]:
    return entry(0, kind) | {"data": data}


async def opened(replica: Replica, keys: Keys) -> None:
    fleet = bearer(keys.production)
    assert (await replica.post("/v1/calls", json=opening(), headers=fleet)).status_code == 200
    started = said("call.recording_started", {"key": "k", "upload_id": "u"})
    r = await replica.post(
        "/v1/calls/call_1/entries", json={"after": 0, "entries": [started]}, headers=fleet
    )
    assert r.status_code == 200, r.text


async def test_a_service_key_reads_the_entries_and_writes_what_became_of_a_recording(
    call_log_settings: CallLogSettings, keys: Keys
) -> None:
    async with running(create_app(call_log_settings)) as replica:
        await opened(replica, keys)
        service = bearer(keys.service)
        read = await replica.get("/v1/calls/call_1/entries", headers=service)
        assert read.status_code == 200, read.text
        # a service reads where the recordings are, not the rest of the call (call.started
        # holds the caller's identity; turns the transcript)
        assert [e["kind"] for e in read.json()["entries"]] == ["call.recording_started"]
        batch = {"after": 1, "entries": [said("call.recording", KEPT)]}
        r = await replica.post("/v1/calls/call_1/entries", json=batch, headers=service)
        assert r.status_code == 200, r.text
        again = await replica.post("/v1/calls/call_1/entries", json=batch, headers=service)
        assert again.status_code == 200  # a replay: the same answer, nothing written twice
        # another wrote first (the count moved): a 409, which the reaper reads as "read again"
        late = {"after": 1, "entries": [said("call.recording_failed", {"reason": "x"})]}
        conflict = await replica.post("/v1/calls/call_1/entries", json=late, headers=service)
        assert conflict.status_code == 409, conflict.text
        metrics = (await replica.get("/metrics")).text
    log = await replica_log(call_log_settings, keys)
    assert log == ["call.started", "call.recording_started", "call.recording"]
    assert 'pinecall_recordings_total{environment="production",outcome="kept"} 1.0' in metrics


async def replica_log(settings: CallLogSettings, keys: Keys) -> list[str]:
    async with running(create_app(settings)) as replica:
        r = await replica.get("/v1/calls/call_1/entries", headers=bearer(keys.operator))
        return [e["kind"] for e in r.json()["entries"]]


@pytest.mark.parametrize(
    ("kinds", "who", "status"),
    [
        (["turn.user"], "service", 403),  # nothing of the call but its recording is a service's
        (["call.recording", "call.sentence"], "service", 403),  # one wrong kind: none written
        (["call.ended"], "service", 422),  # the log's own kind: from no writer at all
        (["call.recording"], "app", 403),  # an app key writes no entry
        (["call.recording"], "sandbox", 403),  # another environment's fleet key
    ],
)
async def test_a_service_key_writes_nothing_else(
    call_log_settings: CallLogSettings, keys: Keys, kinds: list[str], who: str, status: int
) -> None:
    async with running(create_app(call_log_settings)) as replica:
        await opened(replica, keys)
        batch = {"after": 1, "entries": [said(k, KEPT) for k in kinds]}
        key = bearer(getattr(keys, who))
        r = await replica.post("/v1/calls/call_1/entries", json=batch, headers=key)
        assert r.status_code == status, r.text
        assert r.headers["content-type"].startswith("application/problem+json")
        read = await replica.get("/v1/calls/call_1/entries", headers=bearer(keys.operator))
        assert [e["kind"] for e in read.json()["entries"]] == [
            "call.started",
            "call.recording_started",
        ]
