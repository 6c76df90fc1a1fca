"""Worker names and subject tokens: one escaping function, reversible, safe for NATS."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pinecall_contracts.ids import WorkerNameError, parse_worker_name, worker_key
from pinecall_contracts.subjects import NamespaceError, Subjects, escape_token, unescape_token

TOKEN = re.compile(r"^[A-Za-z0-9_=-]+$")


def test_a_worker_name_splits_into_fleet_host_and_start() -> None:
    parsed = parse_worker_name("pinecall/worker-scaled-production-5f654f5f59-zwgjp.1791067258")
    assert parsed.fleet == "pinecall"
    assert parsed.host == "worker-scaled-production-5f654f5f59-zwgjp"
    assert parsed.start == 1791067258
    assert parsed.key == "pinecall/worker-scaled-production-5f654f5f59-zwgjp"


def test_a_host_with_dots_keeps_them_and_the_last_number_is_the_start() -> None:
    parsed = parse_worker_name("pinecall-sandbox/node.example.1791067258")
    assert (parsed.host, parsed.start) == ("node.example", 1791067258)


@pytest.mark.parametrize(
    "name", ["pinecall/worker-a", "worker-a.1", "/worker-a.1", "Pinecall/w.1", "pinecall/.1", ""]
)
def test_not_a_worker_name(name: str) -> None:
    with pytest.raises(WorkerNameError):
        parse_worker_name(name)


def test_a_cordon_names_the_worker_with_or_without_its_start() -> None:
    assert worker_key("pinecall/worker-a.1791067258") == "pinecall/worker-a"
    assert worker_key("pinecall/worker-a") == "pinecall/worker-a"
    with pytest.raises(WorkerNameError):
        worker_key("worker-a")


def test_the_seed_worker_name_escapes_as_documented() -> None:
    assert escape_token("pinecall/worker-a.1791067258") == "pinecall=2Fworker-a=2E1791067258"
    subjects = Subjects("pinecall")
    assert subjects.heartbeat("pinecall/worker-a.1791067258") == (
        "pinecall.fleet.heartbeat.pinecall=2Fworker-a=2E1791067258"
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
