"""A request makes a span only when the process exports spans; without an exporter it takes up the
caller's ``traceparent`` alone, so its work stays in the caller's trace (issue 20, issue 22;
``pinecall_servicekit.http._Traced``)."""

from __future__ import annotations

from typing import Any

import pytest
from litestar import get
from litestar.testing import AsyncTestClient
from opentelemetry import trace
from prometheus_client import CollectorRegistry

from pinecall_servicekit import telemetry
from pinecall_servicekit.http import service_app

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"


@get("/whose", sync_to_thread=False)
def whose() -> dict[str, str]:
    """The trace and span the handler runs under, and whether its span is recorded."""
    span = trace.get_current_span()
    ctx = span.get_span_context()
    return {
        "trace": f"{ctx.trace_id:032x}",
        "span": f"{ctx.span_id:016x}",
        "recording": str(span.is_recording()),
    }


def app() -> Any:
    return service_app(
        service="test", version="0", route_handlers=[whose], lifespan=[],
        registry=CollectorRegistry(),
    )  # fmt: skip


async def ask(exporting: bool, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        # no SDK provider in this process yet (a service's lifespan sets one): the one a service
        # without an exporter sets, which records a span under a sampled parent like this caller's
        # (so a server span, if one were made, would show: its own id, recording)
        trace.set_tracer_provider(telemetry.tracer_provider("test", otlp=False, traces_file=None))
    monkeypatch.setattr(telemetry, "_exporting", [exporting])  # set once a process, by its provider
    assert telemetry.exports_spans() is exporting
    async with AsyncTestClient(app()) as client:
        r = await client.get("/whose", headers={"traceparent": f"00-{TRACE}-{PARENT}-01"})
        assert r.status_code == 200, r.text
        answer: dict[str, str] = r.json()
        return answer


async def test_without_an_exporter_a_request_runs_in_its_callers_context_and_makes_no_span(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen = await ask(False, monkeypatch)
    # the caller's own span is current: no server span was made between them
    assert seen == {"trace": TRACE, "span": PARENT, "recording": "False"}


async def test_with_an_exporter_a_request_makes_its_own_span_in_the_callers_trace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen = await ask(True, monkeypatch)
    assert seen["trace"] == TRACE
    assert seen["span"] != PARENT  # OpenTelemetry's server span, a child of the caller's
