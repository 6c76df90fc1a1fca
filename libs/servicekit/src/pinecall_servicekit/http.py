"""The HTTP base of every service: one Litestar app shape (``shared/CONVENTIONS.md`` habit 4).

:func:`service_app` adds to a service's routes: ``GET /healthz`` (the process answers),
``GET /readyz`` (its dependencies answer: 503 with what is down otherwise), ``GET /metrics``
(Prometheus text from the service's registry, with ``pinecall_http_request_duration_seconds``
timed here), OpenAPI at ``/schema``, OpenTelemetry spans, and
problem details (RFC 9457) for every error: a :class:`~pinecall_servicekit.errors.PinecallError`,
Litestar's own (malformed JSON, wrong types, unknown route), or an unexpected one (500, logged;
:mod:`.refusals`).
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
from litestar import Litestar, MediaType, Response, get
from litestar.connection import ASGIConnection
from litestar.datastructures import State
from litestar.enums import ScopeType
from litestar.middleware.base import DefineMiddleware
from litestar.openapi import OpenAPIConfig, ResponseSpec
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
from pinecall_contracts.problems import ProblemDetails
from pinecall_servicekit.body import StrictBody
from pinecall_servicekit.frozen import freeze_what_started
from pinecall_servicekit.keys import KeyRing, bearer
from pinecall_servicekit.openapi import exact
from pinecall_servicekit.policy import Target, check
from pinecall_servicekit.refusals import HANDLERS, PROBLEM_JSON, TITLES
from pinecall_servicekit.registry import ROUTES
from pinecall_servicekit.telemetry import exports_spans

ReadinessCheck = Callable[[State], Awaitable[dict[str, bool]]]
"""Names each dependency and whether it answers now (``{"postgres": True, "nats": False}``)."""

_log = logging.getLogger(__name__)

# no ``<name>_created`` series beside each counter and histogram: nothing reads them, and the
# registry (pinecall_contracts.metrics) lists what is served
disable_created_metrics()  # type: ignore[no-untyped-call,unused-ignore]


def problems(*statuses: int) -> dict[int, ResponseSpec]:
    """OpenAPI ``responses`` saying that each of ``statuses`` answers a problem detail."""
    return {
        status: ResponseSpec(
            data_container=ProblemDetails,
            description=TITLES[status],
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
        exception_handlers=HANDLERS,
        openapi_config=OpenAPIConfig(title=f"pinecall {service}", version=version, path="/schema"),
        state=State(state or {}),
        # the service's logging is ours (telemetry.configure_telemetry): Litestar's own would start a
        # queue listener thread per app, never stopped (one more per app a test starts)
        logging_config=None,
    )
    exact(app.openapi_schema)  # the schema says what the routes enforce
    return app
