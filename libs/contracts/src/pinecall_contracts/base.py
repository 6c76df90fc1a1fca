"""The base of every wire type, and the JSON codecs shared by producers and consumers."""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec


class Contract(msgspec.Struct, frozen=True, kw_only=True, tag_field="type"):
    """A wire type: frozen, keyword-only, tagged with ``type`` (``"<area>.<name>.v<N>"``).

    On decoding, ``type`` may be left out by a sender (an older worker, ``curl``); when present it
    must be this type's tag. Unknown fields are ignored, so a newer sender's added fields never
    break an older reader.
    """


C = TypeVar("C", bound=Contract)

_encoder = msgspec.json.Encoder()


def encode(message: Contract) -> bytes:
    """``message`` as JSON bytes (UTF-8), its tag included."""
    return _encoder.encode(message)


def decode(data: bytes | str, kind: type[C]) -> C:
    """``data`` (JSON) as ``kind``; raises ``msgspec.ValidationError`` or ``DecodeError``."""
    return msgspec.json.decode(data, type=kind)


def to_builtins(message: Contract) -> Any:
    """``message`` as plain dicts and lists, ready for a JSON response."""
    return msgspec.to_builtins(message)
