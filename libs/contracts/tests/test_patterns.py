r"""Every pattern a contract holds a string to ends at the string's end: Python's ``$`` also
matches before a final newline (msgspec checks a pattern with ``re.search``), so ``call_1\n`` passed
as a call id; ``$(?![\s\S])`` ends each pattern in Python and in JSON Schema alike."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgspec
import pytest

from pinecall_contracts.calls import CallbackRequest, CallIdField, ToolCall, callback_of
from pinecall_contracts.evals import VoiceEval
from pinecall_contracts.outbound import OutboundRequest
from pinecall_contracts.plain import plainly
from pinecall_contracts.schema import export

END = r"$(?![\s\S])"


def patterns(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "pattern" and isinstance(value, str):
                yield value
            else:
                yield from patterns(value)
    elif isinstance(node, list):
        for value in node:
            yield from patterns(value)


def test_every_pattern_of_every_contract_ends_at_the_end() -> None:
    found = sorted(set(patterns(export())))
    assert len(found) >= 10
    for pattern in found:
        for alternative in pattern.split("|^"):
            assert alternative.endswith(END), pattern


@pytest.mark.parametrize("value", ["call_1\n", "call_1\n\n", "\ncall_1"])
def test_a_call_id_with_a_newline_is_refused(value: str) -> None:
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert(value, CallIdField)
    assert msgspec.convert("call_1", CallIdField) == "call_1"


def test_a_tool_call_id_with_a_final_newline_is_refused() -> None:
    with pytest.raises(msgspec.ValidationError, match="matching regex"):
        msgspec.convert({"id": "t1\n", "name": "book"}, ToolCall)


@pytest.mark.parametrize(
    ("kind", "body", "said"),
    [
        (
            "outbound",
            b'{"agent": "a", "to": "15550100"}',
            "Expected a phone number in E.164: a + then 7 to 15 digits, no leading 0, like "
            "+15550100 - at `$.to`",
        ),
        ("eval", b'{"agent": "a", "script": []}', "Expected a list of at least 1 - at `$.script`"),
        (
            "eval",
            b'{"agent": "a", "script": ["  "]}',
            "Expected a line with something to say - at `$.script[0]`",
        ),
        (
            "eval",
            b'{"agent": "A b", "script": ["x"]}',
            "Expected an agent's name: 1 to 128 of a-z 0-9 _ . - (first a letter or a digit) - "
            "at `$.agent`",
        ),
    ],
)
def test_a_refused_value_is_said_as_what_it_means_never_as_its_regex(
    kind: str, body: bytes, said: str
) -> None:
    """The 400s of the phone, outbound and eval bodies (a probe read "in the format the API's
    schema gives" for a malformed number or name): ``plainly`` says what was expected."""
    contract = {"outbound": OutboundRequest, "eval": VoiceEval}[kind]
    with pytest.raises(msgspec.ValidationError) as refused:
        msgspec.json.decode(body, type=contract)
    assert plainly(str(refused.value)) == said


@pytest.mark.parametrize(
    ("heard", "number", "contact"),
    [("+15550100", "+15550100", None), ("15550100", None, "15550100"), ("+0123", None, "+0123")],
)
def test_a_call_back_dials_only_an_e164_number_and_keeps_any_other_as_contact(
    heard: str, number: str | None, contact: str | None
) -> None:
    """The overflow's and a dead worker's call backs: a caller heard at a number the dialler
    cannot dial is still on the log, as its contact, never refused (the caller was promised)."""
    asked = callback_of("booking", heard, reason="fleet full", call="call_1")
    checked = msgspec.convert(msgspec.to_builtins(asked), CallbackRequest)  # the log's decoding
    assert (checked.number, checked.contact) == (number, contact)
