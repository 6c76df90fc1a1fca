"""The reaper's Prometheus metrics, read from the reaper at each scrape.

``pinecall_reaper_reaps_total``; ``pinecall_reaper_calls_total{why}`` (calls reaped: ``ceiling``,
``no_agent``, ``room_gone``); ``pinecall_reaper_rooms_total`` (rooms no call named, taken down);
``pinecall_reaper_failures_total`` (reads and steps that failed, tried again next reap).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import get_args

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from pinecall_reaper.domain import Why
from pinecall_reaper.reaper import Reaper


class ReaperCollector(Collector):
    def __init__(self, reaper: Callable[[], Reaper | None]) -> None:
        self.reaper = reaper

    def collect(self) -> Iterator[Metric]:
        reaper = self.reaper()
        if reaper is None:  # scraped before the lifespan started
            return
        totals = reaper.totals
        yield CounterMetricFamily("pinecall_reaper_reaps", "reaps done", value=reaper.reaps)
        reaped = CounterMetricFamily("pinecall_reaper_calls", "calls reaped", labels=["why"])
        for why in get_args(Why):
            reaped.add_metric([why], totals.get(f"reaped_{why}", 0))
        yield reaped
        yield CounterMetricFamily(
            "pinecall_reaper_rooms", "unclaimed rooms taken down", value=totals.get("rooms", 0)
        )
        yield CounterMetricFamily(
            "pinecall_reaper_failures", "reads and steps failed", value=totals.get("failed", 0)
        )


def registry_for(reaper: Callable[[], Reaper | None]) -> CollectorRegistry:
    registry = CollectorRegistry()
    registry.register(ReaperCollector(reaper))
    return registry
