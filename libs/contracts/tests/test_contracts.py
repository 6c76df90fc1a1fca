"""The wire only grows: golden JSON keeps decoding; every type is tagged, frozen, keyword-only."""

from __future__ import annotations

import datetime as dt
import inspect
import json
from pathlib import Path

import msgspec
import pytest

from pinecall_contracts import (
    agents,
    appsocket,
    calls,
    dispatch,
    evals,
    fleet,
    keys,
    lab,
    livekit,
    outbound,
    persons,
    phones,
    problems,
    whatsapp,
    worker,
)
from pinecall_contracts.base import Contract, decode, encode
from pinecall_contracts.problems import ProblemDetails
from pinecall_contracts.schema import CONTRACTS, export

GOLDEN = Path(__file__).parent / "golden"
BY_TAG = {k.__struct_config__.tag: k for k in CONTRACTS if issubclass(k, Contract)}


def _golden_type(path: Path) -> type[msgspec.Struct]:
    if path.name == "problem.json":
        return ProblemDetails
    tag = path.name.removesuffix(".json").removesuffix(".seed")
    return BY_TAG[tag]


@pytest.mark.parametrize("path", sorted(GOLDEN.glob("*.json")), ids=lambda p: p.name)
def test_golden_fixture_decodes_and_survives_a_round_trip(path: Path) -> None:
    kind = _golden_type(path)
    message = msgspec.json.decode(path.read_bytes(), type=kind)
    again = msgspec.json.decode(msgspec.json.encode(message), type=kind)
    assert again == message
    # every field the fixture names is a field of the type: nothing silently dropped
    fields = {f.encode_name for f in msgspec.structs.fields(kind)} | {"type"}
    assert set(json.loads(path.read_text())) <= fields


def test_every_contract_has_a_golden_fixture() -> None:
    tags = {p.name.removesuffix(".json").removesuffix(".seed") for p in GOLDEN.glob("*.json")}
    assert set(BY_TAG) <= tags


def test_the_schema_lists_every_contract_in_the_modules() -> None:
    defined = {
        obj
        for module in (
            fleet,
            keys,
            livekit,
            problems,
            worker,
            calls,
            dispatch,
            lab,
            agents,
            appsocket,
            whatsapp,
            phones,
            evals,
            outbound,
            persons,
        )
        for _, obj in inspect.getmembers(module, inspect.isclass)
        if issubclass(obj, msgspec.Struct) and obj.__module__ == module.__name__
    }
    assert defined == set(CONTRACTS)


@pytest.mark.parametrize(
    "kind", [k for k in CONTRACTS if issubclass(k, Contract)], ids=lambda k: k.__name__
)
def test_every_contract_is_frozen_keyword_only_and_tagged(kind: type[Contract]) -> None:
    config = kind.__struct_config__
    assert config.frozen
    with pytest.raises(TypeError, match="positional"):
        kind(None)  # keyword-only: a positional argument is refused
    assert config.tag_field == "type"
    assert isinstance(config.tag, str)
    assert config.tag.endswith(tuple(f".v{n}" for n in range(1, 10)))


def test_a_livekit_event_of_an_older_webhook_ingest_decodes_with_the_lifted_fields_empty() -> None:
    """Before the room's sid and the participant's attributes were lifted into the contract, a
    LiveKitEvent carried neither: one still on the stream decodes, with their defaults."""
    golden = json.loads((GOLDEN / "livekit.event.v1.json").read_text())
    older = {k: v for k, v in golden.items() if k not in {"room_sid", "participant_attributes"}}
    event = decode(json.dumps(older), livekit.LiveKitEvent)
    assert (event.room_sid, event.participant_attributes) == (None, {})
    assert event.participant_kind == "AGENT"


def test_a_job_offers_attempt_is_offer_on_the_wire() -> None:
    """``JobOffer.attempt`` keeps the metadata key ``offer``: metadata of an older dispatcher
    decodes, and an older worker reads what this one writes."""
    golden = json.loads((GOLDEN / "dispatch.offer.v1.json").read_text())
    offer = decode(json.dumps(golden), dispatch.JobOffer)
    assert (offer.attempt, offer.number) == (golden["offer"], golden["number"])
    written = json.loads(encode(offer))
    assert written["offer"] == golden["offer"]
    assert "attempt" not in written


def test_a_cause_beside_the_outcome_is_read_by_older_readers_and_older_writers_decode() -> None:
    """``cause`` is a field, not a new outcome value: a reader of before it ignores it (a
    Contract does not forbid unknown fields), and a body of before it decodes with None."""

    class OlderCallEnd(
        msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="calls.end.v1"
    ):
        outcome: calls.Outcome | None = None
        reason: str | None = None

    said = calls.CallEnd(outcome="drained", reason="agent lost", cause="lost_agent")
    assert msgspec.json.decode(encode(said), type=OlderCallEnd) == OlderCallEnd(
        outcome="drained", reason="agent lost"
    )
    older = msgspec.json.encode(OlderCallEnd(outcome="drained"))
    assert decode(older, calls.CallEnd) == calls.CallEnd(outcome="drained", cause=None)
    for kind in (calls.CallRecord, calls.CallSummary, calls.CallEvent):
        [cause] = [f for f in msgspec.structs.fields(kind) if f.name == "cause"]
        assert cause.default is None
    with pytest.raises(msgspec.ValidationError, match=r"\$.cause"):
        decode(
            b'{"type": "calls.end.v1", "outcome": "drained", "cause": "gremlins"}', calls.CallEnd
        )


def test_an_ends_time_is_read_by_older_readers_and_must_carry_its_offset() -> None:
    """``CallEnd.at`` (when the call ended, by the writer's clock): a reader of before it ignores
    it and stamps the end's arrival, as it did; a time with no offset is refused, as an
    entry's ``ts`` is."""

    class OlderCallEnd(
        msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="calls.end.v1"
    ):
        outcome: calls.Outcome | None = None

    at = dt.datetime(2026, 12, 4, 18, 0, 1, 250_000, tzinfo=dt.UTC)
    said = calls.CallEnd(outcome="caller_hangup", at=at)
    assert msgspec.json.decode(encode(said), type=OlderCallEnd) == OlderCallEnd(
        outcome="caller_hangup"
    )
    assert decode(encode(said), calls.CallEnd).at == at
    with pytest.raises(msgspec.ValidationError, match=r"\$.at"):
        decode(b'{"type": "calls.end.v1", "at": "2026-12-04T18:00:01"}', calls.CallEnd)


def test_a_foreign_tag_is_refused() -> None:
    with pytest.raises(msgspec.ValidationError, match="type"):
        decode(
            b'{"type": "fleet.heartbeat_reply.v2", "cordoned": true, "fleet_full": false}',
            fleet.HeartbeatReply,
        )


def test_encoding_carries_the_tag() -> None:
    assert json.loads(encode(fleet.HeartbeatReply(cordoned=True, fleet_full=False)))["type"] == (
        "fleet.heartbeat_reply.v1"
    )


def test_heartbeat_refuses_a_malformed_worker_name_and_negative_counts() -> None:
    body = json.loads((GOLDEN / "fleet.worker_heartbeat.v1.seed.json").read_text())
    with pytest.raises(msgspec.ValidationError, match=r"\$.worker"):
        decode(json.dumps(body | {"worker": "worker-a"}), fleet.WorkerHeartbeat)
    with pytest.raises(msgspec.ValidationError, match=r"\$.active"):
        decode(json.dumps(body | {"active": -1}), fleet.WorkerHeartbeat)


def test_schema_export_names_every_tag() -> None:
    document = export()
    assert set(document["contracts"]) >= set(BY_TAG)
    assert "WorkerHeartbeat" in document["$defs"]
