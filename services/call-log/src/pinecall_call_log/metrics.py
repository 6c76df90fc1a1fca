"""The call log's Prometheus metrics, read from the replica at each scrape.

``pinecall_call_log_batches_total`` (batches answered, written or replayed),
``pinecall_call_log_entries_total`` (entries written from batches and ``/events``),
``pinecall_call_log_calls_cached`` (calls whose identity this replica holds in memory),
``pinecall_call_log_write_errors_total`` (writes answered 5xx),
``pinecall_call_log_batch_write_seconds`` (a batch's write in Postgres),
``pinecall_tool_round_trip_seconds{environment}`` (a worker's tool call to the app's result) and
``pinecall_callbacks_total{environment}`` (call backs requested: follow-ups waiting to be dialled),
``pinecall_recordings_total{environment,outcome}`` (recordings said on the logs: ``completed``,
``kept`` — a dead job's parts — or ``failed``; issue 19).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from pinecall_call_log.service import CallLogService


class CallLogCollector(Collector):
    """Reads one replica's counters when Prometheus scrapes it."""

    def __init__(self, service: Callable[[], CallLogService | None]) -> None:
        self.service = service

    def collect(self) -> Iterator[Metric]:
        service = self.service()
        if service is None:  # scraped before the lifespan started
            return
        yield CounterMetricFamily(
            "pinecall_call_log_batches", "batches answered", value=service.batches
        )
        yield CounterMetricFamily(
            "pinecall_call_log_entries", "entries written", value=service.entries
        )
        yield GaugeMetricFamily(
            "pinecall_call_log_calls_cached", "calls held in memory", value=service.cached
        )
        yield CounterMetricFamily(
            "pinecall_call_log_write_errors",
            "writes answered 5xx",
            value=service.write_errors,
        )
        callbacks = CounterMetricFamily(
            "pinecall_callbacks", "call backs requested", labels=["environment"]
        )
        for environment, n in sorted(service.callbacks.items()):
            callbacks.add_metric([environment], n)
        yield callbacks
        recordings = CounterMetricFamily(
            "pinecall_recordings",
            "recordings said on the calls' logs, by outcome",
            labels=["environment", "outcome"],
        )
        for (environment, outcome), n in sorted(service.recordings.items()):
            recordings.add_metric([environment, outcome], n)
        yield recordings
        yield from service.batch_write.collect()
        yield from service.tools.round_trip.collect()


def registry_for(service: Callable[[], CallLogService | None]) -> CollectorRegistry:
    registry = CollectorRegistry()
    registry.register(CallLogCollector(service))
    return registry
