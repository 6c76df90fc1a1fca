"""The runtime's one error tree, translated only at the edges.

::

    PinecallError                code            status  retryable
    ├── BadRequest               bad_request     400
    ├── Unauthorized             unauthorized    401
    ├── Forbidden                forbidden       403
    ├── NotFound                 not_found       404
    ├── Conflict                 conflict        409
    ├── Unprocessable            unprocessable   422
    ├── TooManyRequests          too_many_requests 429   yes   (a quota: later, it may pass)
    └── Unavailable              unavailable     503     yes
        ├── StoreUnavailable     store_unavailable       (Postgres did not answer)
        └── BusUnavailable       bus_unavailable         (NATS did not answer)

On HTTP an error is a problem detail (RFC 9457, :mod:`pinecall_servicekit.http`); on NATS the
``Nats-Service-Error-Code`` header carries the status and the body the problem detail
(:mod:`pinecall_servicekit.bus`). Driver errors are wrapped where they happen (``store.py``), so
no bare library exception escapes a service.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

import msgspec

from pinecall_contracts.problems import ProblemDetails

ECHOED = 300
"""Characters of a value a request sent that a problem says back, at most: a quoted value in a
message (msgspec's ``Invalid enum value '…'``), an error's message, the ``instance`` (the
request's path; the longest a route takes is ~280). A 5 000-character value is not answered
with 5 000 characters."""
DETAIL_MAX = 1000
"""A problem's ``detail``, at most (one that names a value unquoted: ``no key …``)."""
_QUOTED = re.compile("'([^']{" + str(ECHOED + 1) + ",})'")


def bounded(text: str, limit: int = ECHOED) -> str:
    """``text``, or its first ``limit`` characters and how long it was."""
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text)} characters)"


def unechoed(message: str) -> str:
    """``message`` with each quoted value over :data:`ECHOED` characters cut to it, then at most
    :data:`DETAIL_MAX` characters: what a refusal may say of what a request sent."""
    message = _QUOTED.sub(lambda m: f"'{bounded(m.group(1))}'", message)
    return bounded(message, DETAIL_MAX)


def told(problem: ProblemDetails) -> ProblemDetails:
    """``problem`` as it is sent, on HTTP or NATS: its ``detail`` and each error's message
    :func:`unechoed`, its ``instance`` at most :data:`ECHOED` characters."""
    errors = problem.errors and [
        {k: unechoed(v) if k == "message" and isinstance(v, str) else v for k, v in e.items()}
        for e in problem.errors
    ]
    return msgspec.structs.replace(
        problem,
        detail=problem.detail and unechoed(problem.detail),
        instance=problem.instance and bounded(problem.instance),
        errors=errors,
    )


class PinecallError(Exception):
    """Base of the tree: a ``code``, an HTTP ``status`` and whether a retry may succeed."""

    code: ClassVar[str] = "error"
    status: ClassVar[int] = 500
    title: ClassVar[str] = "Internal error"
    retryable: ClassVar[bool] = False

    def __init__(self, detail: str, *, errors: list[dict[str, Any]] | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.errors = errors

    def problem(self, instance: str | None = None) -> ProblemDetails:
        """This error as a problem detail."""
        return ProblemDetails(
            title=self.title,
            status=self.status,
            detail=self.detail,
            instance=instance,
            code=self.code,
            retryable=self.retryable,
            errors=self.errors,
        )


class BadRequest(PinecallError):
    code, status, title = "bad_request", 400, "Bad request"


class Unauthorized(PinecallError):
    code, status, title = "unauthorized", 401, "Unauthorized"


class Forbidden(PinecallError):
    code, status, title = "forbidden", 403, "Forbidden"


class NotFound(PinecallError):
    code, status, title = "not_found", 404, "Not found"


class Conflict(PinecallError):
    code, status, title = "conflict", 409, "Conflict"


class Unprocessable(PinecallError):
    code, status, title = "unprocessable", 422, "Unprocessable request"


class TooManyRequests(PinecallError):
    code, status, title, retryable = "too_many_requests", 429, "Too many requests", True


class Unavailable(PinecallError):
    code, status, title, retryable = "unavailable", 503, "Service unavailable", True


class StoreUnavailable(Unavailable):
    code = "store_unavailable"


class BusUnavailable(Unavailable):
    code = "bus_unavailable"


_BY_STATUS: dict[int, type[PinecallError]] = {
    kind.status: kind
    for kind in (
        BadRequest,
        Unauthorized,
        Forbidden,
        NotFound,
        Conflict,
        Unprocessable,
        TooManyRequests,
        Unavailable,
    )
}


def from_problem(problem: ProblemDetails) -> PinecallError:
    """The error a problem detail describes (a client's view of a remote failure)."""
    kind = _BY_STATUS.get(problem.status, PinecallError)
    return kind(problem.detail or problem.title, errors=problem.errors)
