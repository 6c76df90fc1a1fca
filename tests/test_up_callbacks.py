"""``up``'s count of the call backs the dispatcher dialled (issue 18, acceptance 6;
:func:`pinecall_runtime.up.report.call_backs`): from the agents' logs and the stand-ins' SIP legs,
a try dialled twice is seen whichever way it was doubled, and is a problem of the run.

``tests/test_up.py``'s over-the-seats run asserts the counts of a real run; there, nothing is
dialled twice, so only these fixed inputs show the count can say otherwise.
"""

from __future__ import annotations

from typing import Any

from pinecall_contracts.calls import AgentEntry
from pinecall_runtime.up.report import call_backs, call_backs_line, call_backs_problems


def requested(seq: int, number: str) -> AgentEntry:
    return AgentEntry(kind="callback.requested", seq=seq, data={"number": number})


def dialled(callback: int, attempt: int, call: str) -> AgentEntry:
    key = f"followup-{callback}-{attempt}"
    return AgentEntry(
        kind="callback.dialled",
        data={"callback": callback, "try": attempt, "call": call, "key": key},
    )


def ended(kind: str, callback: int, **data: Any) -> AgentEntry:
    return AgentEntry(kind=kind, data={"callback": callback} | data)


def leg(call: str) -> dict[str, Any]:
    """An outbound SIP leg as the stand-in's control API lists it (``GET /lab/control/sip/calls``)."""
    return {"room": f"out-{call}", "sip_status": 200}


def test_each_call_back_is_counted_by_its_outcome_and_one_still_owed_is_waiting() -> None:
    entries = {
        "production": [
            requested(1, "+14155550101"),
            dialled(1, 1, "c1"),
            ended("callback.answered", 1, call="c1"),
            requested(2, "+14155550102"),
            dialled(2, 1, "c2"),
            ended("callback.not_reached", 2, call="c2", sip_status_code=486),
            dialled(2, 2, "c3"),  # tried again: a second try, not a try dialled twice
        ],
        "sandbox": [
            requested(1, ""),  # a visitor's contact: no number, given up
            ended("callback.given_up", 1, reason="no_number"),
        ],
    }
    counts = call_backs(entries, [leg("c1"), leg("c2"), leg("c3"), leg("someone-else")])
    assert counts == {
        "requested": 3,
        "dialled": 3,
        "answered": 1,
        "not_reached": 1,
        "given_up": 1,
        "dialled_twice": 0,
        "waiting": 1,  # production's second, its second try out
    }
    assert call_backs_problems(counts) == []
    assert call_backs_line(counts) == (
        "up: call backs: 3 requested, 3 dialled, 1 answered, 1 not reached, 1 given up, "
        "0 dialled twice, 1 waiting at the end"
    )


def test_a_try_with_two_sip_legs_is_dialled_twice_and_a_problem() -> None:
    entries = {"production": [requested(1, "+1415555010"), dialled(1, 1, "c1")]}
    counts = call_backs(entries, [leg("c1"), leg("c1")])
    assert (counts["dialled"], counts["dialled_twice"]) == (1, 1)
    assert call_backs_problems(counts) == ["call backs: 1 tries dialled twice"]


def test_a_try_on_the_agents_log_twice_is_dialled_twice() -> None:
    entries = {
        "production": [requested(1, "+1415555010"), dialled(1, 1, "c1"), dialled(1, 1, "c1")]
    }
    counts = call_backs(entries, [leg("c1")])
    assert (counts["dialled"], counts["dialled_twice"]) == (1, 1)
    assert call_backs_problems(counts) != []


def test_the_same_try_key_in_two_environments_is_two_tries() -> None:
    """A try is its environment's and its key: where each environment has a dispatcher (and a
    database) of its own, each numbers its follow-ups from 1, and ``followup-1-1`` in both is
    two tries, not one dialled twice."""
    entries = {
        environment: [requested(1, "+1415555010"), dialled(1, 1, f"c-{environment}")]
        for environment in ("production", "sandbox")
    }
    counts = call_backs(entries, [leg("c-production"), leg("c-sandbox")])
    assert (counts["requested"], counts["dialled"], counts["dialled_twice"]) == (2, 2, 0)
