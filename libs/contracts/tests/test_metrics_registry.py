"""The metrics registry keeps Prometheus's conventions (https://prometheus.io/docs/practices/naming/):
each service's tests hold its /metrics to the registry (``unregistered``); these hold the
registry to the conventions."""

from __future__ import annotations

import re

from pinecall_contracts.metrics import BY_NAME, METRICS, PROCESSES, QUERYABLE, served_by

UNBOUNDED = {"call", "call_id", "room", "room_sid", "org", "caller", "number", "id", "trace_id"}


def test_every_name_is_one_and_follows_the_conventions() -> None:
    assert len(BY_NAME) == len(METRICS)
    for m in METRICS:
        assert re.fullmatch(r"pinecall_[a-z0-9_]+", m.name), m.name
        assert m.name.endswith("_total") == (m.kind == "counter"), m.name
        # a time is in seconds, and says so in its name
        assert (m.unit == "seconds") == m.name.endswith("_seconds"), m.name
        assert m.served_by, m.name
        assert set(m.served_by) <= set(PROCESSES), m.name
        assert m.help


def test_no_label_grows_with_the_traffic() -> None:
    for m in METRICS:
        assert not UNBOUNDED & set(m.labels), f"{m.name}: {m.labels}"
        assert "le" not in m.labels  # a histogram's own


def test_every_process_serves_something_and_a_histogram_gives_three_series() -> None:
    assert all(served_by(p) for p in PROCESSES)
    assert "pinecall_first_audio_seconds_bucket" in QUERYABLE
    assert "pinecall_first_audio_seconds" not in QUERYABLE  # no such series is scraped
