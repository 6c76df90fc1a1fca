"""The roster's Prometheus metrics, read from the roster at each scrape.

``pinecall_worker_state{fleet,worker,state}`` (1 for the worker's state),
``pinecall_worker_first_audio_p95_seconds{fleet,worker}``, and
``pinecall_fleet{fleet,what}`` with what in accepting, full, seats, seats_free, calls, and
``pinecall_scaled_workers{fleet,what}`` (wanted, running) as KEDA last asked this replica.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from pinecall_roster.service import RosterService


class RosterCollector(Collector):
    """Reads the roster of one replica when Prometheus scrapes it."""

    def __init__(self, service: Callable[[], RosterService | None]) -> None:
        self.service = service

    def collect(self) -> Iterator[Metric]:
        service = self.service()
        if service is None:  # scraped before the lifespan started
            return
        state = GaugeMetricFamily(
            "pinecall_worker_state",
            "1 for the state the roster counts the worker in",
            labels=["fleet", "worker", "state"],
        )
        p95 = GaugeMetricFamily(
            "pinecall_worker_first_audio_p95_seconds",
            "first audio p95 over the worker's last minute",
            labels=["fleet", "worker"],
        )
        fleet = GaugeMetricFamily("pinecall_fleet", "a fleet's totals", labels=["fleet", "what"])
        for view in service.snapshot().fleets:
            for row in view.workers:
                state.add_metric([view.fleet, row.worker, row.state], 1.0)
                if row.first_audio_p95_s is not None:
                    p95.add_metric([view.fleet, row.worker], row.first_audio_p95_s)
            t = view.totals
            for what, value in (
                ("accepting", t.accepting),
                ("full", t.full),
                ("seats", t.seats),
                ("seats_free", t.seats_free),
                ("calls", t.calls),
            ):
                fleet.add_metric([view.fleet, what], float(value))
        scaled = GaugeMetricFamily(
            "pinecall_scaled_workers",
            "a fleet's scaled workers as KEDA last asked: wanted, running",
            labels=["fleet", "what"],
        )
        for name, (wanted, running) in sorted(service.scaled.items()):
            scaled.add_metric([name, "wanted"], float(wanted))
            scaled.add_metric([name, "running"], float(running))
        yield from (state, p95, fleet, scaled)


def registry_for(service: Callable[[], RosterService | None]) -> CollectorRegistry:
    registry = CollectorRegistry()
    registry.register(RosterCollector(service))
    return registry
