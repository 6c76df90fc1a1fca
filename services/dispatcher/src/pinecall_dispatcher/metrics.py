"""The dispatcher's Prometheus metrics.

- ``pinecall_fleet{fleet, what="waiting"}``: rooms that waited for a worker in the last ten
  minutes (not 0 is a call LiveKit or a worker dropped), read by each sweep;
- ``pinecall_fleet{fleet, what="in_offers"}``: rooms kept in offers now;
- ``pinecall_offers_total{fleet, to, reason}``: offers made (``to`` worker, ``reason`` first or
  again) and rooms given to the overflow (``to`` overflow, ``reason`` three_offers, no_seat,
  nobody_heard);
- ``pinecall_admissions_total{environment, fleet, answer}``: the token endpoint's answers,
  ``admitted`` or a refusal (``not_ready``, ``fleet_full``, ``unheard``, ``cordoned``, ``quota``,
  ``unknown_agent``), and the rings refused at placing (``unknown_agent``): intake health, since
  a refusal leaves no call record.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from pinecall_contracts.dispatch import FleetOffers
from pinecall_dispatcher import domain


class _Waiting(Collector):
    def __init__(self) -> None:
        self.fleets: list[FleetOffers] = []

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "pinecall_fleet", "a fleet's rooms in offers", labels=["fleet", "what"]
        )
        for f in self.fleets:
            family.add_metric([f.fleet, "waiting"], float(f.waiting))
            family.add_metric([f.fleet, "in_offers"], float(f.in_offers))
        yield family


class Metrics:
    """Counters of one replica and the fleets' rooms waiting as the last sweep read them."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._waiting = _Waiting()
        self.registry.register(self._waiting)
        self.offers = Counter(
            "pinecall_offers",
            "rooms offered to a worker or given to the overflow",
            ["fleet", "to", "reason"],
            registry=self.registry,
        )
        self.admissions = Counter(
            "pinecall_admissions",
            "the token endpoint's answers (admitted, or a refusal by reason) and rings refused",
            ["environment", "fleet", "answer"],
            registry=self.registry,
        )

    def offer(self, fleet: str, decision: domain.Offer | domain.Overflow) -> None:
        if isinstance(decision, domain.Offer):
            self.offers.labels(fleet, "worker", "first" if decision.attempt == 1 else "again").inc()
        else:
            self.offers.labels(fleet, "overflow", decision.reason).inc()

    def waiting(self, fleets: list[FleetOffers]) -> None:
        self._waiting.fleets = fleets
