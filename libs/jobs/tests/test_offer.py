"""A job's offer is the dispatcher's JobOffer or nothing the job acts on."""

from __future__ import annotations

import datetime as dt

import pytest

from pinecall_contracts.base import encode
from pinecall_contracts.dispatch import JobOffer
from pinecall_jobs import Caller, OfferUnreadable, read_offer

OFFER = JobOffer(
    call="call_7Qm2x",
    fleet="pinecall",
    environment="production",
    room="room-1",
    attempt=2,
    job="sentence",
    agent="support-bot",
    written=12,
    arrived_at=dt.datetime(2026, 11, 30, 6, 49, tzinfo=dt.UTC),
)


def test_the_dispatchers_offer_is_read_back_whole() -> None:
    assert read_offer(encode(OFFER).decode()) == OFFER


@pytest.mark.parametrize(
    "metadata",
    [
        "",  # a dispatch the runtime did not make (a token's, a SIP rule's plain one)
        "{",
        '{"agent": "support-bot"}',  # a CallRing's fields, not an offer
        encode(OFFER).decode().replace('"written":12', '"written":-1'),
        encode(OFFER).decode().replace("dispatch.offer.v1", "dispatch.offer.v2"),
    ],
    ids=["empty", "malformed", "not an offer", "bad count", "a newer offer"],
)
def test_anything_else_is_unreadable(metadata: str) -> None:
    with pytest.raises(OfferUnreadable):
        read_offer(metadata)


def test_only_a_phone_caller_has_a_number() -> None:
    attributes = {"sip.phoneNumber": "+15550100"}
    assert Caller(identity="sip_1", kind="SIP", attributes=attributes).number == "+15550100"
    assert Caller(identity="web", kind="STANDARD", attributes=attributes).number is None
    assert Caller(identity="sip_2", kind="SIP", attributes={}).number is None
