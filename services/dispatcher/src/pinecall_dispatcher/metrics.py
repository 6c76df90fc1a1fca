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
  a refusal leaves no call record;
- ``pinecall_ring_to_offer_seconds{fleet}``: from a room's arrival (its caller's ring) to its
  first offer to a worker;
- ``pinecall_offer_to_open_seconds{fleet}``: from a room's last offer to its opening by the
  worker offered it (``call.opened``, or its agent joining the room, whichever came first);
- ``pinecall_followups{environment, what}``: follow-ups owed (``waiting``: due or not, or a try
  out) and ``due`` now (waiting for a seat), and tries ended in ten minutes (``tries``) and of
  them ``not_reached`` (seed 003: a rise is a capacity or dispatch signal), read by each round of
  the dialler.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Iterator, Mapping

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from pinecall_contracts.dispatch import FleetOffers
from pinecall_contracts.ids import is_overflow
from pinecall_contracts.metrics import LATENCY_BUCKETS_S
from pinecall_dispatcher import domain
from pinecall_dispatcher.store.followups import Counts
from pinecall_dispatcher.store.rows import RoomRow


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


class _Followups(Collector):
    def __init__(self) -> None:
        self.counts: Mapping[str, Counts] = {}

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "pinecall_followups",
            "follow-ups owed and due now, tries ended and not reached in ten minutes",
            labels=["environment", "what"],
        )
        for environment, c in sorted(self.counts.items()):
            family.add_metric([environment, "waiting"], float(c.waiting))
            family.add_metric([environment, "due"], float(c.due))
            family.add_metric([environment, "tries"], float(c.tries))
            family.add_metric([environment, "not_reached"], float(c.not_reached))
        yield family


class Metrics:
    """Counters of one replica and the fleets' rooms waiting as the last sweep read them."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._waiting = _Waiting()
        self.registry.register(self._waiting)
        self._followups = _Followups()
        self.registry.register(self._followups)
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
        self.ring_to_offer = Histogram(
            "pinecall_ring_to_offer_seconds",
            "from a room's ring to its first offer to a worker",
            ["fleet"],
            registry=self.registry,
            buckets=LATENCY_BUCKETS_S,
        )
        self.offer_to_open = Histogram(
            "pinecall_offer_to_open_seconds",
            "from a room's last offer to its call opened",
            ["fleet"],
            registry=self.registry,
            buckets=LATENCY_BUCKETS_S,
        )

    def offered(self, row: RoomRow, decision: domain.Decision) -> None:
        """Count ``decision`` taken for ``row``, and time a first offer from the room's ring."""
        if isinstance(decision, domain.Wait):
            return
        self.offer(row.fleet, decision)
        if isinstance(decision, domain.Offer) and decision.attempt == 1:
            self.ring_to_offer.labels(row.fleet).observe(_between(row.arrived_at, row.offered_at))

    def opened(self, rows: Iterable[RoomRow]) -> None:
        """Time each room a worker opened (the overflow's aside) from its last offer."""
        for row in rows:
            if row.worker and not is_overflow(row.worker) and row.offered_at is not None:
                self.offer_to_open.labels(row.fleet).observe(
                    _between(row.offered_at, row.opened_at)
                )

    def offer(self, fleet: str, decision: domain.Offer | domain.Overflow) -> None:
        if isinstance(decision, domain.Offer):
            self.offers.labels(fleet, "worker", "first" if decision.attempt == 1 else "again").inc()
        else:
            self.offers.labels(fleet, "overflow", decision.reason).inc()

    def waiting(self, fleets: list[FleetOffers]) -> None:
        self._waiting.fleets = fleets

    def followups(self, counts: Mapping[str, Counts]) -> None:
        self._followups.counts = counts


def _between(start: dt.datetime | None, end: dt.datetime | None) -> float:
    """Seconds from ``start`` to ``end`` (0 when either is unknown or the clock went back)."""
    if start is None or end is None:
        return 0.0
    return max(0.0, (end - start).total_seconds())
