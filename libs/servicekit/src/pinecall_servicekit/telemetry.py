"""OpenTelemetry and structured logging, configured in one function per process.

Traces follow the standard ``OTEL_*`` environment (``OTEL_EXPORTER_OTLP_ENDPOINT`` turns the OTLP
exporter on; ``PINECALL_TRACES_FILE``, ``up --traces``, a file of spans). Without either, a span is
recorded only under a sampled parent, and an HTTP request makes none: it takes up its
``traceparent`` as the current context (``pinecall_servicekit.http``), so the trace still travels
and a request pays nothing for spans nobody keeps (:func:`exports_spans`). Logs are one JSON object a line carrying the current ``trace_id`` and ``span_id``. Call
:func:`configure_telemetry` in a service's lifespan (after any fork), never at import.

:func:`configure_logging` also makes stamina's retries say what they retry
(:mod:`pinecall_servicekit.retries`).
"""

from __future__ import annotations

import io
import json
import logging
import os
import sys
import time
from typing import IO, Any, cast

from opentelemetry import trace
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
)
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ParentBased

from pinecall_servicekit.retries import say_retries

_configured: set[str] = set()
_exporting: list[bool] = []


def exports_spans() -> bool:
    """Whether this process's tracer provider exports spans (OTLP or the traces file): set once,
    by :func:`configure_tracing`. Without an exporter no span leaves the process, so a request needs
    only its ``traceparent`` taken up (``pinecall_servicekit.http``), not a span of its own."""
    return bool(_exporting and _exporting[0])


class JsonFormatter(logging.Formatter):
    """A log record as one JSON line: ts, level, logger, message, trace and span ids, extras."""

    _STANDARD = frozenset(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message"}

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        ctx = trace.get_current_span().get_span_context()
        if ctx.is_valid:
            out["trace_id"] = f"{ctx.trace_id:032x}"
            out["span_id"] = f"{ctx.span_id:016x}"
        for key, value in record.__dict__.items():
            if key not in self._STANDARD and not key.startswith("_"):
                out[key] = value
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


def configure_logging(level: str = "INFO", fmt: str = "json") -> None:
    """Route every logger to stderr as JSON lines (or plain text for ``fmt="text"``); stamina's
    retries logged by :func:`pinecall_servicekit.retries.said_retry`."""
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    say_retries()


def configure_telemetry(
    service: str, *, level: str = "INFO", fmt: str = "json", traces_file: str | None = None
) -> None:
    """Logs and traces for ``service``; a second call in the same process changes only logging.

    The tracer provider is global to the process (OpenTelemetry allows one), so two apps in one
    process (tests run two roster replicas side by side) share it.
    """
    configure_logging(level, fmt)
    configure_tracing(service, traces_file=traces_file)


def configure_tracing(service: str, *, traces_file: str | None = None) -> None:
    """The process's tracer provider, once (a second call does nothing): spans to the OTLP
    exporter when ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``…_TRACES_ENDPOINT``) is set, and to
    ``traces_file`` (``PINECALL_TRACES_FILE``: ``up --traces``) when given, by the SDK's
    :class:`ConsoleSpanExporter`, one JSON object a line, appended as each span ends; without
    either, spans are made but not recorded (the module docstring). A job process calls it
    alone: its logging is livekit-agents'."""
    if _configured:
        return
    _configured.add(service)
    otlp = bool(
        os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )
    _exporting.append(otlp or bool(traces_file))
    trace.set_tracer_provider(tracer_provider(service, otlp=otlp, traces_file=traces_file))


def tracer_provider(service: str, *, otlp: bool, traces_file: str | None) -> TracerProvider:
    """The tracer provider :func:`configure_tracing` sets: the OTLP exporter when ``otlp``, the
    file's when ``traces_file``; with neither, a sampler that records no new trace."""
    resource = Resource.create({SERVICE_NAME: service})
    if not (otlp or traces_file):
        # nothing keeps a span: record none (a span of a sampled parent still is), so a request
        # pays no attributes; every span still has its ids, so traceparent travels, logs carry it
        return TracerProvider(resource=resource, sampler=ParentBased(ALWAYS_OFF))
    provider = TracerProvider(resource=resource)
    if otlp:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    if traces_file:
        # each span written as it ends (a job process may end without a flush), as one write
        # of one line to a file opened for appending: the run's processes share it
        out = cast(IO[str], _AppendedLines(traces_file))
        exporter = ConsoleSpanExporter(
            service_name=service, out=out, formatter=lambda span: span.to_json(None) + "\n"
        )
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


class _AppendedLines(io.TextIOBase):
    """A text stream whose every ``write`` is one ``os.write`` to a file opened ``O_APPEND``:
    lines of several processes never interleave within a line."""

    def __init__(self, path: str) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def write(self, s: str) -> int:
        os.write(self._fd, s.encode())
        return len(s)

    def flush(self) -> None:
        pass


def tracer(name: str) -> trace.Tracer:
    """The tracer of a module (``tracer(__name__)``)."""
    return trace.get_tracer(name)
