"""Worker names and subject tokens: one escaping function, reversible, safe for NATS."""

from __future__ import annotations

import datetime as dt
import re

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pinecall_contracts.fleet import CordonSetting, WorkerHeartbeat
from pinecall_contracts.ids import (
    WorkerNameError,
    build_worker_name,
    fleet_of,
    is_overflow,
    overflow_name,
    parse_worker_name,
    worker_key,
)
from pinecall_contracts.subjects import NamespaceError, Subjects, escape_token, unescape_token

TOKEN = re.compile(r"^[A-Za-z0-9_=-]+$")
NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def test_a_worker_name_splits_into_fleet_host_and_start() -> None:
    parsed = parse_worker_name("pinecall/worker-scaled-production-5f654f5f59-zwgjp.1791067258")
    assert parsed.fleet == "pinecall"
    assert parsed.host == "worker-scaled-production-5f654f5f59-zwgjp"
    assert parsed.start == 1791067258
    assert parsed.key == "pinecall/worker-scaled-production-5f654f5f59-zwgjp"


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("pinecall/w.1.1791067258", "worker part 'w.1' holds a '.'"),  # its key reads as w.1
        ("pinecall-sandbox/node.example.1791067258", "holds a '.'"),
        ("pinecall/w.01791067258", "without a leading zero"),  # int() would drop the zero
        ("pinecall/overflow.1791067258", "the overflow's name"),  # its key is the overflow's
        ("pinecall/worker-a", "not <fleet>/<worker>.<start>"),
        ("worker-a.1", "not <fleet>/<worker>.<start>"),
        ("/worker-a.1", "fleet ''"),
        ("Pinecall/w.1", "fleet 'Pinecall'"),
        ("pinecall/.1", "worker part ''"),
        ("pinecall/w.1\n", "start '1\\n'"),
        ("", "not <fleet>/<worker>.<start>"),
    ],
)
def test_not_a_worker_name_and_the_rule_it_breaks(name: str, says: str) -> None:
    with pytest.raises(WorkerNameError, match=re.escape(says)):
        parse_worker_name(name)
    with pytest.raises(WorkerNameError):
        worker_key(name) if "." in name else build_worker_name("pinecall", name, 1)


_NAMEISH = st.text(alphabet="az09-_./AZ", max_size=24)


@given(_NAMEISH)
def test_every_name_that_parses_builds_back_to_itself_and_decodes(name: str) -> None:
    try:
        parsed = parse_worker_name(name)
    except WorkerNameError:
        return
    assert parsed.name == name
    assert build_worker_name(parsed.fleet, parsed.host, parsed.start) == name
    assert worker_key(name) == worker_key(parsed.key) == parsed.key  # with or without its start
    assert fleet_of(name) == fleet_of(parsed.key) == parsed.fleet
    assert not is_overflow(name)
    assert not is_overflow(parsed.key)


@given(_NAMEISH)
def test_the_contracts_patterns_take_exactly_what_the_parser_takes(name: str) -> None:
    beat = {"fleet": "pinecall", "worker": name, "active": 0, "max_jobs": 1, "load": 0.0}
    try:
        parse_worker_name(name)
        parses = True
    except WorkerNameError:
        parses = False
    try:
        msgspec.convert(beat, WorkerHeartbeat)
        decodes = True
    except msgspec.ValidationError:
        decodes = False
    assert parses == decodes


def test_a_cordon_of_a_dotted_name_is_refused_not_read_as_another_worker() -> None:
    # seen: pinecall/w.1.<start> beat and was listed; "fleet cordon pinecall/w.1" cordoned w
    with pytest.raises(WorkerNameError, match=re.escape("holds a '.'")):
        worker_key("pinecall/w.1.1791067258")
    assert worker_key("pinecall/w.1") == "pinecall/w"  # .1 is a start: the grammar says so
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"worker": "pinecall/overflow", "cordoned": True, "at": NOW}, CordonSetting)


def test_the_overflow_has_its_own_name_no_worker_can_have() -> None:
    assert overflow_name("pinecall-sandbox") == "pinecall-sandbox/overflow"
    assert is_overflow("pinecall/overflow")
    assert fleet_of("pinecall/overflow") == "pinecall"
    assert not is_overflow("pinecall/overflowing.1")
    assert not is_overflow("pinecall/overflow.1")
    with pytest.raises(WorkerNameError):
        overflow_name("Pinecall")


def test_a_cordon_names_the_worker_with_or_without_its_start() -> None:
    assert worker_key("pinecall/worker-a.1791067258") == "pinecall/worker-a"
    assert worker_key("pinecall/worker-a") == "pinecall/worker-a"
    with pytest.raises(WorkerNameError):
        worker_key("worker-a")


def test_the_seed_worker_name_escapes_as_documented() -> None:
    assert escape_token("pinecall/worker-a.1791067258") == "pinecall=2Fworker-a=2E1791067258"
    subjects = Subjects("pinecall")
    assert subjects.heartbeat("pinecall/worker-a.1791067258") == (
        "pinecall.fleet.heartbeat.pinecall.pinecall=2Fworker-a=2E1791067258"
    )


@given(st.text(min_size=1, max_size=80))
def test_escaping_is_reversible_and_always_one_token(value: str) -> None:
    token = escape_token(value)
    assert TOKEN.match(token)
    assert unescape_token(token) == value


@given(st.text(min_size=1, max_size=30), st.text(min_size=1, max_size=30))
def test_escaping_never_maps_two_values_to_one_token(a: str, b: str) -> None:
    assert (escape_token(a) == escape_token(b)) == (a == b)


@pytest.mark.parametrize("token", ["a.b", "=2", "=zz", "a b"])
def test_a_malformed_token_is_refused(token: str) -> None:
    with pytest.raises(ValueError, match=r"token|escape|character"):
        unescape_token(token)


@pytest.mark.parametrize("namespace", ["", "Pinecall", "a.b", "a*", "1abc"])
def test_a_namespace_must_be_one_lower_case_token(namespace: str) -> None:
    with pytest.raises(NamespaceError):
        Subjects(namespace)


def test_the_livekit_stream_is_made_as_the_registry_says() -> None:
    """webhook-ingest and the dispatcher both make the stream (whichever starts first): one set of
    settings, whose subjects take every LiveKit event the registry names."""
    subjects = Subjects("pinecall")
    stream = subjects.livekit_stream_settings
    assert (stream.name, stream.subjects) == ("pinecall_livekit", ("pinecall.livekit.event.>",))
    assert (stream.duplicate_window_s, stream.max_age_s) == (120.0, 86_400.0)
    event = subjects.livekit_event("sandbox", "participant_joined", "call-1")
    assert event.startswith(stream.subjects[0].removesuffix(">"))
