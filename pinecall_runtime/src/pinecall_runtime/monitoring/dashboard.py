"""The Grafana dashboard: per fleet, its seats, calls, rooms, overflow and refusals, first audio,
the failing line and its scaled workers; per service, its requests and their latency.

Grafana's dashboard JSON model (schemaVersion 39): a ``datasource`` variable (any Prometheus),
a ``fleet`` variable read from ``pinecall_fleet``, rows of ``timeseries`` panels. Every query names
only metrics of the registry (:mod:`pinecall_contracts.metrics`; ``tests/deploy`` checks it).
"""

from __future__ import annotations

import json
from typing import Any

from pinecall_runtime.monitoring.alerts import FIRST_AUDIO_LINE_S

DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
FLEET = 'fleet=~"$fleet"'
RATE = "$__rate_interval"
FAILING_ERROR_SHARE = 0.5
"""The share of a minute's calls ended in error at which the roster counts a worker failing
(``pinecall_roster.domain.FAILING_ERROR_SHARE``)."""


def _p(q: float, metric: str, by: str, where: str = "") -> str:
    """The ``q`` quantile of histogram ``metric`` (its ``_bucket`` series) by ``by``."""
    selector = f"{{{where}}}" if where else ""
    return (
        f"histogram_quantile({q:g}, sum by ({by + ', ' if by else ''}le) "
        f"(rate({metric}_bucket{selector}[{RATE}])))"
    )


class _Panels:
    """Lays panels out on Grafana's 24-column grid, two a row, numbering them."""

    def __init__(self) -> None:
        self.panels: list[dict[str, Any]] = []
        self._y = 0
        self._x = 0

    def row(self, title: str) -> None:
        if self._x:
            self._y, self._x = self._y + 8, 0
        self.panels.append(
            {
                "id": len(self.panels) + 1,
                "type": "row",
                "title": title,
                "collapsed": False,
                "gridPos": {"h": 1, "w": 24, "x": 0, "y": self._y},
                "panels": [],
            }
        )
        self._y += 1

    def series(
        self,
        title: str,
        description: str,
        unit: str,
        targets: list[tuple[str, str]],
        threshold: float | None = None,
    ) -> None:
        """A time series panel of ``targets`` (query, legend); ``threshold`` drawn as a red line."""
        steps: list[dict[str, Any]] = [{"color": "green", "value": None}]
        if threshold is not None:
            steps.append({"color": "red", "value": threshold})
        self.panels.append(
            {
                "id": len(self.panels) + 1,
                "type": "timeseries",
                "title": title,
                "description": description,
                "datasource": DATASOURCE,
                "gridPos": {"h": 8, "w": 12, "x": self._x, "y": self._y},
                "fieldConfig": {
                    "defaults": {
                        "unit": unit,
                        "min": 0,
                        "thresholds": {"mode": "absolute", "steps": steps},
                        "custom": {
                            "thresholdsStyle": {"mode": "line" if threshold is not None else "off"}
                        },
                    },
                    "overrides": [],
                },
                "options": {
                    "legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
                    "tooltip": {"mode": "multi", "sort": "desc"},
                },
                "targets": [
                    {
                        "refId": chr(ord("A") + i),
                        "datasource": DATASOURCE,
                        "expr": expr,
                        "legendFormat": legend,
                    }
                    for i, (expr, legend) in enumerate(targets)
                ],
            }
        )
        if self._x:
            self._y, self._x = self._y + 8, 0
        else:
            self._x = 12


def _fleets(p: _Panels) -> None:
    p.row("Fleets")
    p.series(
        "Seats used and free",
        "The roster's count of each fleet's seats: used (calls held) and free.",
        "short",
        [
            (f'max by (fleet) (pinecall_fleet{{{FLEET},what="seats"}})'
             f' - max by (fleet) (pinecall_fleet{{{FLEET},what="seats_free"}})',
             "{{fleet}} used"),
            (f'max by (fleet) (pinecall_fleet{{{FLEET},what="seats_free"}})', "{{fleet}} free"),
        ],
    )  # fmt: skip
    p.series(
        "Calls",
        "Calls held now (roster) and calls offered a second (first offers to a worker).",
        "short",
        [
            (f'max by (fleet) (pinecall_fleet{{{FLEET},what="calls"}})', "{{fleet}} held"),
            (f'sum by (fleet) (rate(pinecall_offers_total{{{FLEET},to="worker",reason="first"}}'
             f"[{RATE}]))", "{{fleet}} offered /s"),
        ],
    )  # fmt: skip
    p.series(
        "Ringing, offered, talking",
        "Rooms ringing (rings a second reaching their first offer), in offers now, rooms that "
        "waited for a worker in 10 min, and calls talking.",
        "short",
        [
            (f"sum by (fleet) (rate(pinecall_ring_to_offer_seconds_count{{{FLEET}}}[{RATE}]))",
             "{{fleet}} ringing /s"),
            (f'max by (fleet) (pinecall_fleet{{{FLEET},what="in_offers"}})', "{{fleet}} offered"),
            (f'max by (fleet) (pinecall_fleet{{{FLEET},what="waiting"}})',
             "{{fleet}} waited (10 min)"),
            (f'max by (fleet) (pinecall_fleet{{{FLEET},what="calls"}})', "{{fleet}} talking"),
        ],
    )  # fmt: skip
    p.series(
        "Overflow and refusals",
        "Rooms given to the overflow by reason, calls the overflow answered, and callers refused "
        "at admission by reason (a refusal leaves no call record).",
        "reqps",
        [
            (f'sum by (fleet, reason) (rate(pinecall_offers_total{{{FLEET},to="overflow"}}'
             f"[{RATE}]))", "{{fleet}} to overflow: {{reason}}"),
            (f"sum by (fleet) (rate(pinecall_overflow_calls_total{{{FLEET}}}[{RATE}]))",
             "{{fleet}} overflow answered"),
            (f'sum by (fleet, answer) (rate(pinecall_admissions_total{{{FLEET},'
             f'answer!="admitted"}}[{RATE}]))', "{{fleet}} refused: {{answer}}"),
        ],
    )  # fmt: skip
    p.series(
        "First audio p50 and p95",
        f"From the end of a caller's turn to the agent's first audio; the line: "
        f"{FIRST_AUDIO_LINE_S:g} s (the roster's failing line).",
        "s",
        [
            (_p(0.5, "pinecall_first_audio_seconds", "fleet", FLEET), "{{fleet}} p50"),
            (_p(0.95, "pinecall_first_audio_seconds", "fleet", FLEET), "{{fleet}} p95"),
        ],
        threshold=FIRST_AUDIO_LINE_S,
    )
    p.series(
        "The failing line",
        "Each worker's first audio p95 over its last minute (the roster's; failing past "
        f"{FIRST_AUDIO_LINE_S:g} s), its calls' error share ({FAILING_ERROR_SHARE:g} fails it), "
        "and the workers the roster counts failing.",
        "short",
        [
            (f"max by (fleet, worker) (pinecall_worker_first_audio_p95_seconds{{{FLEET}}})",
             "{{worker}} first audio p95 (s)"),
            (f'sum by (fleet) (rate(pinecall_worker_calls_ended_total{{{FLEET},outcome="failed"}}'
             f"[{RATE}])) / sum by (fleet) (rate(pinecall_worker_calls_ended_total{{{FLEET}}}"
             f"[{RATE}]))", "{{fleet}} error share"),
            (f'sum by (fleet) (max by (fleet, worker) (pinecall_worker_state{{{FLEET},'
             f'state="failing"}}))', "{{fleet}} workers failing"),
        ],
        threshold=FAILING_ERROR_SHARE,
    )  # fmt: skip
    p.series(
        "Scaled workers: wanted and running",
        "What the roster told KEDA to run (wanted) beside the scaled workers heard (running).",
        "short",
        [
            (f'max by (fleet) (pinecall_scaled_workers{{{FLEET},what="wanted"}})',
             "{{fleet}} wanted"),
            (f'max by (fleet) (pinecall_scaled_workers{{{FLEET},what="running"}})',
             "{{fleet}} running"),
        ],
    )  # fmt: skip
    p.series(
        "Offers: ring to offer, offer to open (p95)",
        "From a room's ring to its first offer, and from its last offer to its call opened.",
        "s",
        [
            (_p(0.95, "pinecall_ring_to_offer_seconds", "fleet", FLEET), "{{fleet}} ring→offer"),
            (_p(0.95, "pinecall_offer_to_open_seconds", "fleet", FLEET), "{{fleet}} offer→open"),
        ],
    )


def _services(p: _Panels) -> None:
    p.row("Services")
    p.series(
        "Requests a second",
        "Every HTTP service's requests, by status class.",
        "reqps",
        [
            (f"sum by (service, status) (rate(pinecall_http_request_duration_seconds_count"
             f"[{RATE}]))", "{{service}} {{status}}"),
        ],
    )  # fmt: skip
    p.series(
        "Request latency p95",
        "Every HTTP service's p95, long polls and streams included (their whole length).",
        "s",
        [(_p(0.95, "pinecall_http_request_duration_seconds", "service"), "{{service}}")],
    )
    p.series(
        "The call log: batch write, tool round trip (p95)",
        "A batch of entries written in Postgres; a worker's tool call to the app's result.",
        "s",
        [
            (_p(0.95, "pinecall_call_log_batch_write_seconds", ""), "batch write"),
            (_p(0.95, "pinecall_tool_round_trip_seconds", "environment"),
             "{{environment}} tool round trip"),
        ],
    )  # fmt: skip
    p.series(
        "The call log: entries and errors",
        "Entries written a second, batches a second, writes answered 5xx, call backs requested.",
        "short",
        [
            (f"sum(rate(pinecall_call_log_entries_total[{RATE}]))", "entries /s"),
            (f"sum(rate(pinecall_call_log_batches_total[{RATE}]))", "batches /s"),
            (f"sum(rate(pinecall_call_log_write_errors_total[{RATE}]))", "write errors /s"),
            (f"sum by (environment) (rate(pinecall_callbacks_total[{RATE}]))",
             "{{environment}} call backs /s"),
        ],
    )  # fmt: skip
    p.series(
        "Webhooks",
        "LiveKit's webhooks stored, delivered again, refused; webhook to stream p95 (s).",
        "short",
        [
            (f"sum by (environment) (rate(pinecall_webhooks_total[{RATE}]))",
             "{{environment}} stored /s"),
            (f"sum by (environment) (rate(pinecall_webhooks_duplicate_total[{RATE}]))",
             "{{environment}} duplicates /s"),
            (f"sum by (environment, reason) (rate(pinecall_webhooks_refused_total[{RATE}]))",
             "{{environment}} refused: {{reason}}"),
            (_p(0.95, "pinecall_webhook_to_stream_seconds", "environment"),
             "{{environment}} to stream p95 (s)"),
        ],
    )  # fmt: skip
    p.series(
        "The reaper and the chat",
        "Calls reaped a second by why, reaps failed; chat sockets served.",
        "short",
        [
            (f"sum by (why) (rate(pinecall_reaper_calls_total[{RATE}]))", "reaped: {{why}}"),
            (f"sum(rate(pinecall_reaper_failures_total[{RATE}]))", "reaper failures /s"),
            ("sum(pinecall_chat_sockets)", "chat sockets"),
        ],
    )


def dashboard() -> dict[str, Any]:
    """The dashboard's JSON model."""
    p = _Panels()
    _fleets(p)
    _services(p)
    return {
        "uid": "pinecall-runtime",
        "title": "Pinecall Runtime",
        "description": "Fleets, their calls and the services (issue 22). Made by "
        "python -m pinecall_runtime.monitoring: edit pinecall_runtime/monitoring/dashboard.py.",
        "tags": ["pinecall"],
        "timezone": "utc",
        "editable": True,
        "graphTooltip": 1,
        "refresh": "30s",
        "schemaVersion": 39,
        "version": 1,
        "time": {"from": "now-1h", "to": "now"},
        "timepicker": {},
        "annotations": {"list": []},
        "links": [],
        "templating": {
            "list": [
                {
                    "name": "datasource",
                    "label": "Prometheus",
                    "type": "datasource",
                    "query": "prometheus",
                    "current": {},
                    "hide": 0,
                },
                {
                    "name": "fleet",
                    "label": "fleet",
                    "type": "query",
                    "datasource": DATASOURCE,
                    "query": {
                        "query": "label_values(pinecall_fleet, fleet)",
                        "refId": "fleets",
                    },
                    "definition": "label_values(pinecall_fleet, fleet)",
                    "multi": True,
                    "includeAll": True,
                    "allValue": ".*",
                    "current": {},
                    "refresh": 2,
                    "sort": 1,
                    "hide": 0,
                },
            ]
        },
        "panels": p.panels,
    }


def dashboard_json() -> str:
    """:func:`dashboard` as the file's text."""
    return json.dumps(dashboard(), indent=2, ensure_ascii=False) + "\n"
