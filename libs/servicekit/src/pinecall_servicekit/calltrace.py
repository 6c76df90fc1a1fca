"""One trace per call: the W3C trace context a call's work runs in, in every service.

A call is one trace from its ring to its seal (issue 22, "One trace per call"). LiveKit's
webhooks carry no ``traceparent``, and a call's ring comes as several of them (the room started, the
caller joined, …), each its own HTTP request; so the call's trace id is not chosen at random but
derived from what every service knows of the call before it has any header to read: its
environment and its room (one call per room, GLOSSARY). :func:`call_context` is that trace's
context: webhook-ingest starts (or continues) the trace with it, the dispatcher's offers and the
token endpoint run in it, and a job without a ``traceparent`` in its offer falls back to it.
Between services the context travels as W3C ``traceparent`` (NATS headers, the ``JobOffer``'s
``traceparent``, HTTP headers to call-log, the app socket's frames); the derived id only makes a
service that batches or sweeps (the dispatcher's offers run in a task of their fleet) land each
call's work in the right trace.

The derived root is a remote parent that no service records (a trace shows its spans under one
absent root); it is marked sampled only when this process's sampler would record a new trace
(``telemetry.configure_telemetry`` with an exporter), so a process that keeps no span records
none for it.

``pinecall-runtime logs CALL`` prints :func:`call_trace_id` of the call's environment and room.
"""

from __future__ import annotations

import hashlib

from opentelemetry import context, propagate, trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.sampling import Decision
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

CALL = "pinecall.call"
"""The span attribute naming the call a span's work is for (its call id)."""
ROOM = "pinecall.room"
ENVIRONMENT = "pinecall.environment"


def _derived(environment: str, room: str) -> tuple[int, int]:
    digest = hashlib.sha256(f"pinecall-call\0{environment}\0{room}".encode()).digest()
    trace_id = int.from_bytes(digest[:16], "big") or 1
    span_id = int.from_bytes(digest[16:24], "big") or 1
    return trace_id, span_id


def call_trace_id(environment: str, room: str) -> str:
    """The trace id of the call in ``room`` of ``environment``: 32 lower-case hex digits."""
    return f"{_derived(environment, room)[0]:032x}"


def _records_new_traces(trace_id: int) -> bool:
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        return False  # the API's no-op provider: nothing is recorded anyway
    decided = provider.sampler.should_sample(None, trace_id, "call")
    return decided.decision is Decision.RECORD_AND_SAMPLE


def call_context(environment: str, room: str, *, sampled: bool | None = None) -> context.Context:
    """The context to run a call's work in: the current one when it already is the call's trace
    (a handler of a message that carried it), else the call's derived root, marked sampled when
    ``sampled`` says so (None: when this process's tracer provider records a new trace)."""
    trace_id, span_id = _derived(environment, room)
    current = trace.get_current_span().get_span_context()
    if current.is_valid and current.trace_id == trace_id:
        return context.get_current()
    if sampled is None:
        sampled = _records_new_traces(trace_id)
    flags = TraceFlags(TraceFlags.SAMPLED if sampled else TraceFlags.DEFAULT)
    root = SpanContext(trace_id=trace_id, span_id=span_id, is_remote=True, trace_flags=flags)
    return trace.set_span_in_context(NonRecordingSpan(root))


def traceparent() -> str | None:
    """The current context as a W3C ``traceparent`` value (``00-<trace>-<span>-<flags>``), or
    None outside any span."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier.get("traceparent")


def call_traceparent(environment: str, room: str) -> str | None:
    """The ``traceparent`` of :func:`call_context` (the current span when it is the call's)."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier, context=call_context(environment, room))
    return carrier.get("traceparent")


def from_traceparent(value: str | None) -> context.Context | None:
    """The context a ``traceparent`` value names, or None for none or one that does not parse
    (W3C's rule: a bad header is ignored, never an error)."""
    if not value:
        return None
    extracted = propagate.extract({"traceparent": value})
    return extracted if trace.get_current_span(extracted).get_span_context().is_valid else None
