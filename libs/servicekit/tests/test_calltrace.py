"""One trace per call (issue 22): the call's trace id from its environment and room, the
context a service's work for the call runs in, ``traceparent`` there and back, and the file of
spans ``up --traces`` reads."""

from __future__ import annotations

import json
from pathlib import Path

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from pinecall_servicekit import calltrace
from pinecall_servicekit.telemetry import tracer_provider


def recording() -> tuple[trace.Tracer, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider.get_tracer("test"), exporter


def test_a_calls_trace_id_is_its_environment_and_rooms_alone() -> None:
    one = calltrace.call_trace_id("production", "room-1")
    assert one == calltrace.call_trace_id("production", "room-1")
    assert len(one) == 32
    assert int(one, 16) != 0
    assert one != calltrace.call_trace_id("sandbox", "room-1")
    assert one != calltrace.call_trace_id("production", "room-2")


def test_two_services_that_never_talked_start_the_calls_work_in_one_trace() -> None:
    """Two webhooks of one room (each its own request) and an offer made in a batch's task:
    each starts its span in the call's context and finds the call's one trace."""
    tracer, exporter = recording()
    for name in ("webhook room_started", "webhook participant_joined", "offer"):
        with tracer.start_as_current_span("request"):  # each in a request of its own
            parent = calltrace.call_context("production", "room-1", sampled=True)
            with tracer.start_as_current_span(name, context=parent):
                pass
    traced = {s.name: s.context.trace_id for s in exporter.get_finished_spans()}
    want = int(calltrace.call_trace_id("production", "room-1"), 16)
    assert {n: t for n, t in traced.items() if n != "request"} == {
        "webhook room_started": want,
        "webhook participant_joined": want,
        "offer": want,
    }
    assert traced["request"] != want


def test_work_already_in_the_calls_trace_goes_on_under_its_span() -> None:
    tracer, exporter = recording()
    root = calltrace.call_context("sandbox", "web-call_1", sampled=True)
    # the second item is made once the first is entered: in the consume span
    with (
        tracer.start_as_current_span("consume", context=root) as consume,
        tracer.start_as_current_span(
            "offer", context=calltrace.call_context("sandbox", "web-call_1")
        ),
    ):
        pass
    offer = next(s for s in exporter.get_finished_spans() if s.name == "offer")
    assert offer.parent is not None
    assert offer.parent.span_id == consume.get_span_context().span_id


def test_a_process_that_keeps_no_span_records_none_for_a_call() -> None:
    tracer, exporter = recording()
    with tracer.start_as_current_span(
        "webhook", context=calltrace.call_context("production", "r", sampled=False)
    ) as span:
        assert not span.is_recording()
        assert f"{span.get_span_context().trace_id:032x}" == calltrace.call_trace_id(
            "production", "r"
        )
    assert exporter.get_finished_spans() == ()


def test_traceparent_there_and_back_and_a_bad_one_is_ignored() -> None:
    tracer, _ = recording()
    assert calltrace.traceparent() is None  # outside any span
    with tracer.start_as_current_span(
        "offer", context=calltrace.call_context("production", "room-1", sampled=True)
    ) as span:
        sent = calltrace.traceparent()
    assert sent == f"00-{calltrace.call_trace_id('production', 'room-1')}-" + (
        f"{span.get_span_context().span_id:016x}-01"
    )
    back = calltrace.from_traceparent(sent)
    assert back is not None
    assert trace.get_current_span(back).get_span_context().span_id == (
        span.get_span_context().span_id
    )
    for bad in (None, "", "00-nothex-00-01", "00-" + "0" * 32 + "-" + "0" * 16 + "-01"):
        assert calltrace.from_traceparent(bad) is None


def test_the_traces_file_gets_a_json_line_per_span_of_each_service(tmp_path: Path) -> None:
    """Two services' providers append to one file (``up --traces``), each span a line as it
    ends, its service named."""
    path = tmp_path / "traces.jsonl"
    for service in ("dispatcher", "worker"):
        provider = tracer_provider(service, otlp=False, traces_file=str(path))
        with provider.get_tracer("t").start_as_current_span(
            f"{service} work", context=calltrace.call_context("production", "r", sampled=True)
        ):
            pass
        provider.shutdown()
    spans = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(s["name"], s["resource"]["attributes"]["service.name"]) for s in spans] == [
        ("dispatcher work", "dispatcher"),
        ("worker work", "worker"),
    ]
    assert {s["context"]["trace_id"] for s in spans} == {
        "0x" + calltrace.call_trace_id("production", "r")
    }
