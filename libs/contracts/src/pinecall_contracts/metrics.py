"""The one registry of Prometheus metrics, the way :mod:`pinecall_contracts.subjects` lists subjects.

Every metric any process of the runtime serves on ``/metrics`` is here: its name as scraped (a
counter's ``_total`` included), its type, its unit, its labels and which processes serve it. A
process serves only what is here, with exactly these labels, and everything here is served by the
processes it names (``pinecall_servicekit.testing.metrics.unregistered`` checks a ``/metrics``
body; each service's tests run it). The alert rules and the dashboard name only metrics of this
registry (``tests/deploy``).

Prometheus's conventions (https://prometheus.io/docs/practices/naming/): the base unit in the name
(``_seconds``), ``_total`` on counters, and bounded label sets. A label names a fleet, an
environment, a worker (as many as a fleet's pods), a reason or a state from a closed list, an HTTP
route's template: never a call, a room, an org or anything else that grows with the traffic.

Histograms' buckets are :data:`LATENCY_BUCKETS_S` (in seconds) unless the entry says otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Kind = Literal["counter", "gauge", "histogram"]
Process = Literal[
    "roster",
    "call-log",
    "webhook-ingest",
    "dispatcher",
    "reaper",
    "chat",
    "worker",
    "overflow",
]
PROCESSES: tuple[Process, ...] = (
    "roster",
    "call-log",
    "webhook-ingest",
    "dispatcher",
    "reaper",
    "chat",
    "worker",
    "overflow",
)
"""Every process that serves ``/metrics``: the HTTP services on their port, the worker and the
overflow on their health port (``PINECALL_HEALTH_PORT``)."""
HTTP_SERVICES: tuple[Process, ...] = PROCESSES[:6]
"""The processes built on ``pinecall_servicekit.http.service_app`` (each serves
``pinecall_http_request_duration_seconds``)."""

LATENCY_BUCKETS_S: tuple[float, ...] = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    15.0,
    30.0,
)
"""Histogram buckets, in seconds: 5 ms (a batch write) to 30 s (a room offered three times)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MetricSpec:
    """One metric as scraped."""

    name: str
    """The family's name as scraped: a counter's ends ``_total``; a histogram's series add
    ``_bucket``, ``_sum`` and ``_count``."""
    kind: Kind
    unit: str
    """``seconds``, or what is counted (``calls``, ``webhooks``); ``1`` for a 0/1 state."""
    labels: tuple[str, ...]
    """Exactly these labels on every sample (a histogram's ``le`` aside), in this order."""
    served_by: tuple[Process, ...]
    help: str


def _m(
    name: str, kind: Kind, unit: str, labels: tuple[str, ...], by: tuple[Process, ...], help: str
) -> MetricSpec:
    return MetricSpec(name=name, kind=kind, unit=unit, labels=labels, served_by=by, help=help)


METRICS: tuple[MetricSpec, ...] = (
    # every HTTP service
    _m(
        "pinecall_http_request_duration_seconds",
        "histogram",
        "seconds",
        ("service", "method", "route", "status"),
        HTTP_SERVICES,
        "HTTP requests answered, by the route's template and the status's class (2xx, 4xx, 5xx)",
    ),
    # roster
    _m(
        "pinecall_fleet",
        "gauge",
        "workers, seats, calls or rooms",
        ("fleet", "what"),
        ("roster", "dispatcher"),
        "a fleet's totals: the roster's accepting, full (workers), seats, seats_free, calls; the "
        "dispatcher's waiting (rooms that waited for a worker in ten minutes), in_offers (now)",
    ),
    _m(
        "pinecall_followups",
        "gauge",
        "follow-ups or tries",
        ("environment", "what"),
        ("dispatcher",),
        "an environment's follow-ups (call backs to dial): waiting (owed), due (now, waiting for a "
        "seat); its tries ended in ten minutes (tries) and of them not_reached (seed 003)",
    ),
    _m(
        "pinecall_worker_state",
        "gauge",
        "1",
        ("fleet", "worker", "state"),
        ("roster",),
        "1 for the state the roster counts the worker in (accepting, full, failing, draining, "
        "cordoned, silent)",
    ),
    _m(
        "pinecall_worker_first_audio_p95_seconds",
        "gauge",
        "seconds",
        ("fleet", "worker"),
        ("roster",),
        "first audio p95 over the worker's last minute, as its heartbeat said",
    ),
    _m(
        "pinecall_scaled_workers",
        "gauge",
        "workers",
        ("fleet", "what"),
        ("roster",),
        "a fleet's scaled workers as KEDA last asked (GET /v1/fleet/wanted): wanted, running "
        "(heard, not silent)",
    ),
    # dispatcher
    _m(
        "pinecall_offers_total",
        "counter",
        "offers",
        ("fleet", "to", "reason"),
        ("dispatcher",),
        "rooms offered to a worker (to worker; reason first, again) or given to the overflow "
        "(to overflow; reason three_offers, no_seat, nobody_heard)",
    ),
    _m(
        "pinecall_admissions_total",
        "counter",
        "callers",
        ("environment", "fleet", "answer"),
        ("dispatcher",),
        "the token endpoint's answers (admitted, or a refusal by reason) and rings refused",
    ),
    _m(
        "pinecall_ring_to_offer_seconds",
        "histogram",
        "seconds",
        ("fleet",),
        ("dispatcher",),
        "from a room's ring (LiveKit's room_started) to its first offer to a worker",
    ),
    _m(
        "pinecall_offer_to_open_seconds",
        "histogram",
        "seconds",
        ("fleet",),
        ("dispatcher",),
        "from a room's last offer to its call.opened",
    ),
    # call-log
    _m(
        "pinecall_call_log_batches_total",
        "counter",
        "batches",
        (),
        ("call-log",),
        "batches answered, written or replayed",
    ),
    _m(
        "pinecall_call_log_entries_total",
        "counter",
        "entries",
        (),
        ("call-log",),
        "entries written from batches and /events",
    ),
    _m(
        "pinecall_call_log_calls_cached",
        "gauge",
        "calls",
        (),
        ("call-log",),
        "calls whose identity this replica holds in memory",
    ),
    _m(
        "pinecall_call_log_batch_write_seconds",
        "histogram",
        "seconds",
        (),
        ("call-log",),
        "a batch of entries written (or found written) in Postgres",
    ),
    _m(
        "pinecall_call_log_write_errors_total",
        "counter",
        "requests",
        (),
        ("call-log",),
        "writes (batches, entries, opens, ends, seals) answered 5xx: the log did not take them",
    ),
    _m(
        "pinecall_tool_round_trip_seconds",
        "histogram",
        "seconds",
        ("environment",),
        ("call-log",),
        "from a worker's tool call asked to the app's result on the log",
    ),
    _m(
        "pinecall_callbacks_total",
        "counter",
        "call backs",
        ("environment",),
        ("call-log",),
        "call backs requested (callback.requested on an agent's log): follow-ups waiting to be "
        "dialled",
    ),
    _m(
        "pinecall_recordings_total",
        "counter",
        "recordings",
        ("environment", "outcome"),
        ("call-log",),
        "recordings said on the calls' logs: completed, kept (a dead job's parts) or failed "
        "(call.recording_failed)",
    ),
    # webhook-ingest
    _m(
        "pinecall_webhooks_total",
        "counter",
        "webhooks",
        ("environment", "event"),
        ("webhook-ingest",),
        "LiveKit webhooks stored on the stream",
    ),
    _m(
        "pinecall_webhooks_duplicate_total",
        "counter",
        "webhooks",
        ("environment",),
        ("webhook-ingest",),
        "LiveKit webhooks delivered again and dropped",
    ),
    _m(
        "pinecall_webhooks_refused_total",
        "counter",
        "webhooks",
        ("environment", "reason"),
        ("webhook-ingest",),
        "LiveKit webhooks refused, by reason",
    ),
    _m(
        "pinecall_webhook_to_stream_seconds",
        "histogram",
        "seconds",
        ("environment",),
        ("webhook-ingest",),
        "from a webhook's arrival to its event stored on the LiveKit stream",
    ),
    # reaper
    _m("pinecall_reaper_reaps_total", "counter", "reaps", (), ("reaper",), "reaps done"),
    _m(
        "pinecall_reaper_calls_total",
        "counter",
        "calls",
        ("why",),
        ("reaper",),
        "calls reaped (ceiling, no_agent, room_gone, timeout)",
    ),
    _m(
        "pinecall_reaper_rooms_total",
        "counter",
        "rooms",
        (),
        ("reaper",),
        "unclaimed rooms taken down",
    ),
    _m(
        "pinecall_reaper_failures_total",
        "counter",
        "steps",
        (),
        ("reaper",),
        "reads and steps failed",
    ),
    # chat
    _m("pinecall_chat_sockets", "gauge", "sockets", (), ("chat",), "chat sockets served"),
    _m(
        "pinecall_chat_calls_total",
        "counter",
        "calls",
        ("what",),
        ("chat",),
        "written calls: opened, taken_up, answered, replayed",
    ),
    _m(
        "pinecall_chat_refused_total",
        "counter",
        "dials and frames",
        (),
        ("chat",),
        "dials and frames refused with a close code",
    ),
    # worker (its main process, from what its job processes tell it)
    _m(
        "pinecall_worker_seats",
        "gauge",
        "seats",
        ("fleet",),
        ("worker",),
        "the worker's seats (PINECALL_MAX_JOBS)",
    ),
    _m(
        "pinecall_worker_calls",
        "gauge",
        "calls",
        ("fleet",),
        ("worker",),
        "calls the worker holds now",
    ),
    _m(
        "pinecall_worker_registered",
        "gauge",
        "1",
        ("fleet",),
        ("worker",),
        "1 while LiveKit holds the worker",
    ),
    _m(
        "pinecall_worker_draining",
        "gauge",
        "1",
        ("fleet",),
        ("worker",),
        "1 while the worker drains (SIGTERM or a cordon)",
    ),
    _m(
        "pinecall_first_audio_seconds",
        "histogram",
        "seconds",
        ("fleet",),
        ("worker",),
        "from the end of a caller's turn to the agent's first audio",
    ),
    _m(
        "pinecall_worker_calls_ended_total",
        "counter",
        "calls",
        ("fleet", "outcome"),
        ("worker",),
        "calls the worker ended: ok, or failed (ended in error or its job died)",
    ),
    _m(
        "pinecall_worker_call_errors_total",
        "counter",
        "errors",
        ("fleet",),
        ("worker",),
        "call.error entries its calls wrote",
    ),
    _m(
        "pinecall_worker_relay_requests_total",
        "counter",
        "requests",
        ("fleet",),
        ("worker",),
        "requests its relay sent call-log (POST /v1/entries, a tick's batches each)",
    ),
    _m(
        "pinecall_worker_relay_batches_total",
        "counter",
        "batches",
        ("fleet",),
        ("worker",),
        "calls' batches its relay's requests carried",
    ),
    # overflow
    _m(
        "pinecall_overflow_calls_total",
        "counter",
        "calls",
        ("fleet",),
        ("overflow",),
        "calls the overflow answered (its sentence, a call back, hang up)",
    ),
    _m(
        "pinecall_overflow_calls",
        "gauge",
        "calls",
        ("fleet",),
        ("overflow",),
        "calls the overflow holds now",
    ),
    _m(
        "pinecall_overflow_registered",
        "gauge",
        "1",
        ("fleet",),
        ("overflow",),
        "1 while LiveKit holds the overflow",
    ),
)

BY_NAME: dict[str, MetricSpec] = {m.name: m for m in METRICS}


def served_by(process: Process) -> dict[str, MetricSpec]:
    """The metrics ``process`` serves, by name."""
    return {m.name: m for m in METRICS if process in m.served_by}


def series_names(spec: MetricSpec) -> tuple[str, ...]:
    """The names a query may use for ``spec``: a histogram's ``_bucket``, ``_sum``, ``_count``."""
    if spec.kind == "histogram":
        return tuple(spec.name + s for s in ("_bucket", "_sum", "_count"))
    return (spec.name,)


QUERYABLE: frozenset[str] = frozenset(n for m in METRICS for n in series_names(m))
"""Every series name a rule or a dashboard's query may name (and ``ALERTS``, Prometheus's own)."""
