"""An org's quotas on the wire: only the names in ``QUOTA_NAMES``, each a count."""

from __future__ import annotations

import msgspec
import pytest

from pinecall_contracts.persons import QUOTA_NAMES, OrgCreate


def test_an_org_is_made_with_a_known_quota() -> None:
    made = msgspec.convert(
        {"name": "org_acme", "environments": ["production"], "quotas": {"concurrent_calls": 5}},
        OrgCreate,
    )
    assert made.quotas == {"concurrent_calls": 5}
    assert QUOTA_NAMES == ("concurrent_calls",)


@pytest.mark.parametrize(
    ("quotas", "words"),
    [({"calls": 5}, "Invalid enum value 'calls'"), ({"concurrent_calls": -1}, ">= 0")],
)
def test_an_unknown_quota_or_a_negative_one_is_refused(quotas: dict[str, int], words: str) -> None:
    with pytest.raises(msgspec.ValidationError, match=words):
        msgspec.convert(
            {"name": "org_acme", "environments": ["production"], "quotas": quotas}, OrgCreate
        )
    schema = msgspec.json.schema(OrgCreate)["$defs"]["OrgCreate"]["properties"]["quotas"]
    assert schema["propertyNames"] == {"enum": ["concurrent_calls"]}
