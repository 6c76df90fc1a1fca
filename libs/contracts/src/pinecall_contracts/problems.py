"""Problem details (RFC 9457), the one error body of every HTTP service and NATS ops reply."""

from __future__ import annotations

from typing import Any

import msgspec


class ProblemDetails(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """``application/problem+json``.

    ``code`` names the error in the runtime's tree (``pinecall_servicekit.errors``) and
    ``retryable`` says whether the same request may succeed later. Not tagged: RFC 9457 fixes
    the members, and ``type`` is the problem's URI.
    """

    type: str = "about:blank"
    title: str
    status: int
    detail: str | None = None
    instance: str | None = None
    code: str | None = None
    retryable: bool = False
    errors: list[dict[str, Any]] | None = None
    """Field-level errors of a malformed body: ``[{"path": "$.active", "message": ...}]``."""
