"""A webhook signed by a LiveKit whose clock differs from ours: within :data:`CLOCK_SKEW` (the
minute LiveKit allows its own tokens) it verifies, beyond it it is refused with the reason."""

from __future__ import annotations

import base64
import hashlib
import time

import jwt
import pytest

from pinecall_loadlab.livekit.testing import API_KEY, API_SECRET
from pinecall_testkit.webhook_ingest import agent_left
from pinecall_webhook_ingest.domain import CLOCK_SKEW, WebhookRefused, verify


def signed_by_a_clock_off_by(body: bytes, skew_s: int) -> str:
    """The ``Authorization`` of a LiveKit whose clock reads ``skew_s`` seconds from ours (ahead
    when positive) and signs a token valid for 10 s, as LiveKit's notifier does (nbf, exp)."""
    now = int(time.time()) + skew_s
    digest = base64.b64encode(hashlib.sha256(body).digest()).decode()
    claims = {"iss": API_KEY, "nbf": now, "exp": now + 10, "sha256": digest, "video": {}}
    return jwt.encode(claims, API_SECRET, algorithm="HS256")


@pytest.mark.parametrize("skew_s", [-45, 45])
def test_a_token_within_the_skew_verifies(skew_s: int) -> None:
    assert CLOCK_SKEW.total_seconds() == 60
    body = agent_left()
    event = verify(body, signed_by_a_clock_off_by(body, skew_s), API_KEY, API_SECRET)
    assert event.event == "participant_left"


@pytest.mark.parametrize(
    ("skew_s", "reason", "words"),
    [
        (-120, "expired", "the token has expired (more than 60 s ago)"),
        (120, "not_yet_valid", "not valid for more than 60 s yet: LiveKit's clock is ahead"),
    ],
)
def test_a_token_beyond_the_skew_is_refused_with_the_reason(
    skew_s: int, reason: str, words: str
) -> None:
    body = agent_left()
    with pytest.raises(WebhookRefused) as refused:
        verify(body, signed_by_a_clock_off_by(body, skew_s), API_KEY, API_SECRET)
    assert refused.value.reason == reason
    assert words in str(refused.value)
