"""Problem details (RFC 9457) for every refusal and failure of a service's HTTP API: a
:class:`~pinecall_servicekit.errors.PinecallError`, Litestar's own refusals (a parameter or body
that does not validate, malformed JSON, an unknown route or method), a body nested too deep, a
value Postgres refuses, and an unexpected error (500, logged). :data:`HANDLERS` is what
:func:`pinecall_servicekit.http.service_app` gives Litestar.
"""

from __future__ import annotations

import logging
from typing import Any

import msgspec
import sqlalchemy as sa
from litestar import Request, Response
from litestar.exceptions import HTTPException, ValidationException
from litestar.params import ParameterKwarg
from litestar.types import ExceptionHandlersMap

from pinecall_contracts.plain import plainly
from pinecall_contracts.problems import ProblemDetails
from pinecall_servicekit.db import unstorable
from pinecall_servicekit.errors import BadRequest, PinecallError, bounded, told

PROBLEM_JSON = "application/problem+json"
"""A problem detail's media type (RFC 9457, section 3)."""

_log = logging.getLogger(__name__)


def problem_response(problem: ProblemDetails) -> Response[bytes]:
    """A problem detail as an ``application/problem+json`` response, what it quotes of the
    request bounded (:func:`pinecall_servicekit.errors.told`)."""
    return Response(
        content=msgspec.json.encode(told(problem)),
        status_code=problem.status,
        media_type=PROBLEM_JSON,
    )


TITLES = {
    400: "Malformed request",
    401: "No key, or a key that is not good",
    403: "A key that may not do this",
    404: "Not found",
    409: "Conflict",
    405: "Method not allowed",
    413: "Too large",
    415: "Not JSON",
    422: "Well-formed but not acceptable",
    429: "Over a quota: later it may pass",
    503: "A dependency did not answer",
}
"""Each status's problem detail title, also its OpenAPI description (:func:`.http.problems`)."""


def _pinecall_error(request: Request[Any, Any, Any], exc: PinecallError) -> Response[bytes]:
    return problem_response(exc.problem(instance=request.url.path))


def _named(request: Request[Any, Any, Any]) -> dict[str, str]:
    """The route's parameters a query key, header or cookie of another name fills (``wanted:
    Annotated[..., QueryParameter(name="state")]``): the handler's name → the request's."""
    try:
        parameters = request.route_handler.parsed_fn_signature.parameters
    except (KeyError, AttributeError):  # no route handler in the scope: nothing to rename
        return {}
    return {
        name: p.kwarg_definition.name
        for name, p in parameters.items()
        if isinstance(p.kwarg_definition, ParameterKwarg)
        and p.kwarg_definition.name
        and p.kwarg_definition.name != name
    }


def _validation_error(request: Request[Any, Any, Any], exc: ValidationException) -> Response[bytes]:
    """Litestar's refusal of a path or query parameter or a body, as problem details: the
    method and path, never the query Litestar's message quotes whole; each error's ``key`` the
    request's name of it, not the handler's (Litestar names a renamed parameter by the handler's:
    :func:`_named`); each error's message with a pattern said as what it means
    (:func:`plainly`); :func:`problem_response` bounds what they quote."""
    errors = exc.extra if isinstance(exc.extra, list) else None
    named = _named(request) if errors else {}
    for e in errors or []:
        if isinstance(e, dict) and e.get("key") in named:
            e["key"] = named[e["key"]]
        # a pattern said as what it means, never as its regex
        if isinstance(e, dict) and isinstance(e.get("message"), str):
            # a required body left out: Litestar says only the missing key, "'data'"
            missing_body = e.get("key") == "data" and e["message"] == "'data'"
            e["message"] = "a JSON body is required" if missing_body else plainly(e["message"])
    detail = str(exc.detail)
    if detail.startswith("Validation failed for "):  # Litestar's, with the URL and its query
        detail = f"Validation failed for {request.method} {bounded(request.url.path)}"
    return problem_response(
        ProblemDetails(
            title="Malformed request",
            status=400,
            detail=plainly(detail),
            instance=request.url.path,
            code="bad_request",
            errors=[dict(e) for e in errors] if errors else None,
        )
    )


_HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    413: "too_large",
    415: "unsupported_media_type",
    422: "unprocessable",
}


def _http_error(request: Request[Any, Any, Any], exc: HTTPException) -> Response[bytes]:
    """Litestar's own refusals (a body that is not JSON, too large, a route or method that is
    not there) in the same shape as ours: the status's title, and what Litestar said as the
    detail; with the headers it set (a 405's ``Allow``, the methods the route takes: RFC 9110
    15.5.6)."""
    status = exc.status_code
    response = problem_response(
        ProblemDetails(
            title=TITLES.get(status, str(exc.detail)),
            status=status,
            detail=str(exc.detail),
            instance=request.url.path,
            code=_HTTP_CODES.get(status, "http_error"),
            retryable=status >= 500,
        )
    )
    response.headers.update(exc.headers or {})
    return response


def _too_deep(request: Request[Any, Any, Any], exc: RecursionError) -> Response[bytes]:
    """A body nested deeper than the decoder's stack goes (about a thousand levels): the
    caller's error, said before any key is looked at, with no traceback in the log."""
    return _pinecall_error(request, BadRequest("malformed JSON: nested too deeply"))


def _unstorable(request: Request[Any, Any, Any], exc: sa.exc.DataError) -> Response[bytes]:
    """A value Postgres refuses (a NUL character) that no store wrapped: 422, never retried."""
    return _pinecall_error(request, unstorable("storing it", exc))


def _unexpected(request: Request[Any, Any, Any], exc: Exception) -> Response[bytes]:
    _log.exception("unexpected error on %s %s", request.method, request.url.path)
    return problem_response(
        ProblemDetails(
            title="Internal error",
            status=500,
            instance=request.url.path,
            code="internal",
            retryable=True,
        )
    )


HANDLERS: ExceptionHandlersMap = {
    PinecallError: _pinecall_error,
    ValidationException: _validation_error,
    HTTPException: _http_error,
    RecursionError: _too_deep,
    sa.exc.DataError: _unstorable,
    Exception: _unexpected,
}
"""Each error a request can end in, and the problem detail it answers."""
