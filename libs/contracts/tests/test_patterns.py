r"""Every pattern a contract holds a string to ends at the string's end: Python's ``$`` also
matches before a final newline (msgspec checks a pattern with ``re.search``), so ``call_1\n`` passed
as a call id; ``$(?![\s\S])`` ends each pattern in Python and in JSON Schema alike."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgspec
import pytest

from pinecall_contracts.calls import CallIdField, ToolCall
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
