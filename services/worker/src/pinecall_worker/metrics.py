"""The worker's Prometheus metrics, served on its health port (``GET /metrics``).

Counted in the main process from what the job processes already tell it over the measures socket
(:mod:`pinecall_worker.measures`): each turn's first audio, each call's error and end. A job
process writes nothing of its own, so the counts survive its death and need no multiprocess mode.

- ``pinecall_worker_seats{fleet}``, ``pinecall_worker_calls{fleet}`` (held now),
  ``pinecall_worker_registered{fleet}`` and ``pinecall_worker_draining{fleet}`` (0 or 1), read at
  each scrape;
- ``pinecall_first_audio_seconds{fleet}``: each turn's first audio (seconds);
- ``pinecall_worker_calls_ended_total{fleet,outcome}``: ``ok`` or ``failed`` (ended in error, or
  its job died);
- ``pinecall_worker_call_errors_total{fleet}``: ``call.error`` entries its calls wrote;
- ``pinecall_worker_relay_requests_total{fleet}`` and ``pinecall_worker_relay_batches_total{fleet}``:
  the requests its relay sent call-log and the calls' batches they carried (their ratio is the
  batches a request: the worker's calls on one tick), read at each scrape.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from pinecall_contracts.metrics import LATENCY_BUCKETS_S


@dataclass(frozen=True, slots=True)
class Now:
    """What the worker is at a scrape."""

    seats: int
    calls: int
    registered: bool
    draining: bool
    relay_requests: int = 0
    """Requests its relay sent call-log (:mod:`pinecall_worker.relay`), since it started."""
    relay_batches: int = 0
    """Calls' batches those requests carried."""


class WorkerMetrics(Collector):
    """The worker's counts (fed by the measures socket) and its state, read by ``now()``."""

    def __init__(self, fleet: str, now: Callable[[], Now]) -> None:
        self.fleet = fleet
        self.now = now
        self._first_audio = Histogram(
            "pinecall_first_audio_seconds",
            "from the end of a caller's turn to the agent's first audio",
            ["fleet"],
            registry=None,
            buckets=LATENCY_BUCKETS_S,
        )
        self._ended = Counter(
            "pinecall_worker_calls_ended",
            "calls the worker ended: ok, or failed",
            ["fleet", "outcome"],
            registry=None,
        )
        self._errors = Counter(
            "pinecall_worker_call_errors",
            "call.error entries its calls wrote",
            ["fleet"],
            registry=None,
        )
        for outcome in ("ok", "failed"):  # both said from the start: a rate needs a zero
            self._ended.labels(fleet, outcome)
        self._errors.labels(fleet)
        self.registry = CollectorRegistry()
        self.registry.register(self)

    def turn(self, first_audio_s: float) -> None:
        self._first_audio.labels(self.fleet).observe(first_audio_s)

    def error(self) -> None:
        self._errors.labels(self.fleet).inc()

    def ended(self, failed: bool) -> None:
        self._ended.labels(self.fleet, "failed" if failed else "ok").inc()

    def collect(self) -> Iterator[Metric]:
        now = self.now()
        for name, help, value in (
            ("pinecall_worker_seats", "the worker's seats", now.seats),
            ("pinecall_worker_calls", "calls the worker holds now", now.calls),
            ("pinecall_worker_registered", "1 while LiveKit holds the worker", now.registered),
            ("pinecall_worker_draining", "1 while the worker drains", now.draining),
        ):
            family = GaugeMetricFamily(name, help, labels=["fleet"])
            family.add_metric([self.fleet], float(value))
            yield family
        for name, help, value in (
            (
                "pinecall_worker_relay_requests",
                "requests its relay sent call-log",
                now.relay_requests,
            ),
            ("pinecall_worker_relay_batches", "calls' batches they carried", now.relay_batches),
        ):
            counter = CounterMetricFamily(name, help, labels=["fleet"])
            counter.add_metric([self.fleet], float(value))
            yield counter
        yield from self._first_audio.collect()
        yield from self._ended.collect()
        yield from self._errors.collect()
