"""The dispatcher reads the roster with its own service key, never an operator's: its settings
hold no other key, and once that key is revoked the roster refuses its reads."""

from __future__ import annotations

import logging

import pytest

from pinecall_loadlab.livekit.callers import LAB_AGENT, LAB_ORG
from pinecall_loadlab.scenarios.chain import Chain
from pinecall_testkit.call_log import Keys, bearer


async def test_the_dispatcher_reads_the_roster_with_its_service_key(
    chain: Chain, keys: Keys, caplog: pytest.LogCaptureFixture
) -> None:
    settings = chain.service.settings
    assert settings.service_key == keys.service
    assert not hasattr(settings, "operator_key")
    await chain.worker("worker-a", seats=2)
    # admitted: the fleets rows (the environment's fleet and LiveKit) and the worker's row read
    r = await chain.dispatchers[0].post(
        "/v1/tokens", json={"agent": LAB_AGENT, "org": LAB_ORG}, headers=bearer(keys.app)
    )
    assert r.status_code == 200, r.text
    key_id = keys.service.split("_")[1]
    revoked = await chain.roster.post(
        f"/v1/ops/keys/{key_id}/revoke", headers=bearer(keys.operator)
    )
    assert revoked.status_code == 200
    ring = chain.roster.app.state.roster.keyring
    await ring.changes.wait_for(lambda: not ring.remembers(key_id), timeout=4)
    with caplog.at_level(logging.WARNING, logger="pinecall_dispatcher.roster"):
        await chain.service.roster.refresh()
    assert "the workers' rows not read from the roster: 401 Unauthorized: revoked key" in (
        caplog.text
    )
