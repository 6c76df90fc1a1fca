"""Validation errors said plainly. msgspec says a value that does not match a field's pattern by
quoting the regex (``Expected `str` matching regex '^[0-9]{5,20}$' - at `$.x```), which tells a
person nothing; each pattern a person may get wrong is registered here with what it means, and
:func:`plainly` says that instead (a regex nobody registered: "in the format the API's schema
gives"). The HTTP services' 400s and the CLI's refusals go through it."""

from __future__ import annotations

import re

MEANINGS: dict[str, str] = {}
"""``repr(pattern)`` → what a value matching it is, as a person would say it."""
_QUOTED = re.compile(r"`str` matching regex '.*?'(?= - at `|$)")
_AT_LEAST = re.compile(r"`str` of length >= ([0-9]+)")
_AT_MOST = re.compile(r"`str` of length <= ([0-9]+)")
_ITEMS_AT_LEAST = re.compile(r"`array` of length >= ([0-9]+)")
_ITEMS_AT_MOST = re.compile(r"`array` of length <= ([0-9]+)")


def means(pattern: str, meaning: str) -> str:
    """Register what ``pattern`` means (``"E.164, like +15551234567"``); returns ``pattern``."""
    MEANINGS[repr(pattern)] = meaning
    return pattern


def plainly(message: str) -> str:
    """``message`` (msgspec's) with the regex it quotes replaced by what it means."""
    for quoted, meaning in MEANINGS.items():
        message = message.replace(f"`str` matching regex {quoted}", meaning)
    message = _QUOTED.sub("a string in the format the API's schema gives", message)
    message = _AT_LEAST.sub(r"at least \1 characters", message)
    message = _ITEMS_AT_LEAST.sub(r"a list of at least \1", message)
    message = _ITEMS_AT_MOST.sub(r"a list of at most \1", message)
    return _AT_MOST.sub(r"at most \1 characters", message)
