"""The HTTP base of every service: one Litestar app shape (``shared/CONVENTIONS.md`` habit 4).

:func:`service_app` adds to a service's routes: ``GET /healthz`` (the process answers),
``GET /readyz`` (its dependencies answer: 503 with what is down otherwise), ``GET /metrics``
(Prometheus text from the service's registry, with ``pinecall_http_request_duration_seconds``
timed here), OpenAPI at ``/schema``, OpenTelemetry spans, and
problem details (RFC 9457) for every error: a :class:`~pinecall_servicekit.errors.PinecallError`,
Litestar's own (malformed JSON, wrong types, unknown route), or an unexpected one (500, logged).
A JSON body is decoded once, strictly, into the handler's declared type
(:class:`~pinecall_servicekit.body.StrictBody`).
Once started, what the process holds is frozen out of the garbage collector's walks
(:func:`freeze_what_started`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, cast

import msgspec
import sqlalchemy as sa
from litestar import Litestar, MediaType, Request, Response, get
from litestar.connection import ASGIConnection
from litestar.datastructures import State
from litestar.enums import ScopeType
from litestar.exceptions import HTTPException, ValidationException
from litestar.middleware.base import DefineMiddleware
from litestar.openapi import OpenAPIConfig, ResponseSpec
from litestar.params import ParameterKwarg
from litestar.plugins.opentelemetry import (
    OpenTelemetryConfig,
    OpenTelemetryInstrumentationMiddleware,
)
from litestar.routes import HTTPRoute
from litestar.types import ASGIApp, ControllerRouterHandler, Message, Receive, Scope, Send
from opentelemetry import context, propagate
from opentelemetry.instrumentation.asgi import asgi_getter
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Histogram,
    disable_created_metrics,
    generate_latest,
)

from pinecall_contracts.keys import KeyInfo
from pinecall_contracts.metrics import LATENCY_BUCKETS_S
from pinecall_contracts.plain import plainly
from pinecall_contracts.problems import ProblemDetails
from pinecall_servicekit.body import StrictBody
from pinecall_servicekit.db import unstorable
from pinecall_servicekit.errors import BadRequest, PinecallError, bounded, told
from pinecall_servicekit.frozen import freeze_what_started
from pinecall_servicekit.keys import KeyRing, bearer
from pinecall_servicekit.openapi import exact
from pinecall_servicekit.policy import Target, check
from pinecall_servicekit.registry import ROUTES
from pinecall_servicekit.telemetry import exports_spans

PROBLEM_JSON = "application/problem+json"
ReadinessCheck = Callable[[State], Awaitable[dict[str, bool]]]
"""Names each dependency and whether it answers now (``{"postgres": True, "nats": False}``)."""

_log = logging.getLogger(__name__)

# no ``<name>_created`` series beside each counter and histogram: nothing reads them, and the
# registry (pinecall_contracts.metrics) lists what is served
disable_created_metrics()  # type: ignore[no-untyped-call,unused-ignore]


def problem_response(problem: ProblemDetails) -> Response[bytes]:
    """A problem detail as an ``application/problem+json`` response, what it quotes of the
    request bounded (:func:`pinecall_servicekit.errors.told`)."""
    return Response(
        content=msgspec.json.encode(told(problem)),
        status_code=problem.status,
        media_type=PROBLEM_JSON,
    )


_TITLES = {
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


def problems(*statuses: int) -> dict[int, ResponseSpec]:
    """OpenAPI ``responses`` saying that each of ``statuses`` answers a problem detail."""
    return {
        status: ResponseSpec(
            data_container=ProblemDetails,
            description=_TITLES[status],
            media_type=PROBLEM_JSON,
            generate_examples=False,
        )
        for status in statuses
    }


async def request_key(
    request: ASGIConnection[Any, Any, Any, Any],
    keyring: KeyRing,
    *,
    org: str | None = None,
    agent: str | None = None,
) -> KeyInfo:
    """The key the request's ``Authorization: Bearer <key>`` header names, if it and its person
    may do what the request's route needs (the one registry, :data:`.registry.ROUTES`, by the
    method, ``WS`` for a WebSocket, and the route's path template): ``Unauthorized`` (401) for
    none or one that is not good, ``Forbidden`` (403) saying what is missing
    (:func:`pinecall_servicekit.policy.check`, with the target the request names: ``?org=``,
    ``?environment=``, ``{agent}``, and the ``org`` and ``agent`` its body names, which the
    handler passes: a person's key acts for its org and its agents whichever part of the
    request names them)."""
    method = "WS" if request.scope["type"] == ScopeType.WEBSOCKET else request.scope["method"]
    permission = ROUTES[(method, request.scope["path_template"])]
    holder = await keyring.holder(bearer(request.headers.get("authorization")))
    named = request.path_params.get("agent")
    target = Target(
        org=org if org is not None else request.query_params.get("org"),
        environment=request.query_params.get("environment"),
        agent=agent if agent is not None else named if isinstance(named, str) else None,
    )
    check(holder, permission, target)
    return holder.key


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
            title=_TITLES.get(status, str(exc.detail)),
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


class Health(msgspec.Struct, frozen=True):
    """``GET /healthz``: the process answers."""

    status: str


class Readiness(msgspec.Struct, frozen=True):
    """``GET /readyz``: whether every dependency answers (200), or not (503), and each one's."""

    ready: bool
    checks: dict[str, bool]


def _health_routes(registry: CollectorRegistry, readiness: ReadinessCheck | None) -> list[Any]:
    @get("/healthz", media_type=MediaType.JSON, sync_to_thread=False)
    def healthz() -> Health:
        """The process answers."""
        return Health(status="ok")

    @get(
        "/readyz",
        media_type=MediaType.JSON,
        responses={
            503: ResponseSpec(
                data_container=Readiness,
                description="A dependency did not answer: which, in checks",
                generate_examples=False,
            )
        },
    )
    async def readyz(state: State) -> Response[Readiness]:
        """Whether the service's dependencies answer: 200, or 503 naming those that do not."""
        checks = await readiness(state) if readiness else {}
        ready = all(checks.values())
        return Response(Readiness(ready=ready, checks=checks), status_code=200 if ready else 503)

    @get("/metrics", media_type=CONTENT_TYPE_LATEST, sync_to_thread=False)
    def metrics() -> Response[str]:
        """Prometheus's text format of the service's metrics."""
        return Response(content=generate_latest(registry).decode(), media_type=CONTENT_TYPE_LATEST)

    return [healthz, readyz, metrics]


def _allowed(app: Litestar, template: str) -> str:
    """The methods a route template takes, over every handler of it (Litestar's own ``OPTIONS``
    answer names only those of the first handler registered at a path)."""
    methods = {
        method
        for route in app.routes
        if isinstance(route, HTTPRoute) and route.path_format == template
        for method in route.methods
    }
    return ", ".join(sorted(methods))


def options(scope: Scope, send: Send) -> Send:
    """``send`` with an ``OPTIONS`` answer's ``Allow`` naming every method of its route (RFC
    9110 10.2.1; a client generated from the OpenAPI reads it)."""
    template = scope.get("path_template")

    async def sent(message: Message) -> None:
        if message["type"] == "http.response.start" and template:
            allow = _allowed(scope["litestar_app"], template).encode()
            message["headers"] = [
                (name, allow if name.lower() == b"allow" else value)
                for name, value in message.get("headers", [])
            ]
        await send(message)

    return sent


class _Traced(OpenTelemetryInstrumentationMiddleware):
    """OpenTelemetry's ASGI middleware (a server span a request) when the process exports spans;
    otherwise only the request's ``traceparent`` taken up as the current context, so its logs and
    what it publishes stay in the caller's trace. Why: a span nobody exports cost 0.25–0.35 ms of
    CPU a request (``bench/request_floor.py``, issue 20: a call-log replica's /healthz 0.93 ms with
    the span, 0.57–0.63 without), a tenth of a batch's whole cost."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if exports_spans() or scope["type"] not in (ScopeType.HTTP, ScopeType.WEBSOCKET):
            await super().__call__(scope, receive, send)
            return
        token = context.attach(propagate.extract(cast(dict[str, Any], scope), getter=asgi_getter))
        try:
            await self.app(scope, receive, send)
        finally:
            context.detach(token)


class _Timed:
    """Litestar middleware timing each HTTP request into ``requests``, labelled by the service,
    the method, the route's template (``/v1/calls/{call:str}``: bounded, never a call id) and the
    status's class; from the request's start to the response's last body byte (a long poll or a
    stream: its whole length)."""

    def __init__(self, app: ASGIApp, requests: Histogram, service: str) -> None:
        self.app, self.requests, self.service = app, requests, service

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP:
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def sent(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(
                scope, receive, options(scope, sent) if scope["method"] == "OPTIONS" else sent
            )
        finally:
            route = scope.get("path_template") or "unrouted"
            self.requests.labels(
                self.service, scope.get("method", "GET"), route, f"{status // 100}xx"
            ).observe(time.perf_counter() - started)


def service_app(
    *,
    service: str,
    version: str,
    route_handlers: Sequence[ControllerRouterHandler],
    lifespan: Sequence[Callable[[Litestar], AbstractAsyncContextManager[None]]],
    registry: CollectorRegistry,
    readiness: ReadinessCheck | None = None,
    state: dict[str, Any] | None = None,
) -> Litestar:
    """A service's Litestar app with the shared routes, error mapping, OpenAPI and telemetry."""
    requests = Histogram(
        "pinecall_http_request_duration_seconds",
        "HTTP requests answered, by route template and status class",
        ["service", "method", "route", "status"],
        registry=registry,
        buckets=LATENCY_BUCKETS_S,
    )
    # a span per request when spans are exported, none per ASGI message (two or three more a
    # request, for nothing); Litestar runs an OpenTelemetry middleware outermost
    traced = OpenTelemetryConfig(exclude_spans=["receive", "send"])
    app = Litestar(
        middleware=[
            DefineMiddleware(_Traced, config=traced),
            lambda app: _Timed(app, requests, service),
        ],
        route_handlers=[*route_handlers, *_health_routes(registry, readiness)],
        lifespan=list(lifespan),
        on_startup=[freeze_what_started],
        # every JSON body decoded once, strictly, from its bytes; responses are Litestar's
        dto=StrictBody,
        return_dto=None,
        exception_handlers={
            PinecallError: _pinecall_error,
            ValidationException: _validation_error,
            HTTPException: _http_error,
            RecursionError: _too_deep,
            sa.exc.DataError: _unstorable,
            Exception: _unexpected,
        },
        openapi_config=OpenAPIConfig(title=f"pinecall {service}", version=version, path="/schema"),
        state=State(state or {}),
        # the service's logging is ours (telemetry.configure_telemetry): Litestar's own would start a
        # queue listener thread per app, never stopped (one more per app a test starts)
        logging_config=None,
    )
    exact(app.openapi_schema)  # the schema says what the routes enforce
    return app
