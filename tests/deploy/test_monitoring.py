"""The alert rules (issue 22, acceptance 1 and 5): the chart's files are what
``pinecall_runtime.monitoring`` makes and the chart carries them; Debian's promtool checks the rules
and runs a unit test per alert (series that fire it, series that keep it quiet); every rule names
only metrics of the registry (``pinecall_contracts.metrics``); ``up --prometheus``'s configuration.
The dashboard: test_dashboard.py. promtool comes from ``./dev sync`` (apt-get install
prometheus)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from pinecall_contracts.metrics import QUERYABLE
from pinecall_runtime.doctor import runbook
from pinecall_runtime.monitoring.alerts import ALERTS, rules_yaml
from pinecall_runtime.monitoring.dashboard import dashboard, dashboard_json

from .conftest import FILES, metric_names, promtool

Series = list[dict[str, str]]
Case = tuple[Series, dict[str, str], Series]
"""Series that fire the alert, the firing alert's labels, series that keep it quiet."""


def _s(name: str, labels: str, values: str) -> dict[str, str]:
    """One input series as scraped (a job and an instance, which the rules must not keep)."""
    return {"series": f'{name}{{job="pinecall",instance="a:1",{labels}}}', "values": values}


def _fleet(what: str, values: str) -> dict[str, str]:
    return _s("pinecall_fleet", f'fleet="pinecall",what="{what}"', values)


def _buckets(name: str, le_counts: dict[str, str]) -> Series:
    return [_s(name, f'fleet="pinecall",le="{le}"', v) for le, v in le_counts.items()]


FLEET = {"fleet": "pinecall"}
CASES: dict[str, Case] = {
    "PinecallFleetSilent": (
        [_fleet("accepting", "0x20"), _fleet("full", "0x20")],
        FLEET,
        # one worker full is a fleet that takes calls; and a roster that came back
        [_fleet("accepting", "0x20"), _fleet("full", "1x20")],
    ),
    "PinecallFleetFull": (
        [_fleet("seats_free", "0x20"), _fleet("seats", "8x20")],
        FLEET,
        # a seat free, or a fleet with no seat at all (silent: its own alert)
        [_fleet("seats_free", "1x20"), _fleet("seats", "8x20")],
    ),
    "PinecallWorkerFailing": (
        [
            _s(
                "pinecall_worker_state",
                'fleet="pinecall",worker="pinecall/w.1",state="failing"',
                "1x20",
            )
        ],
        {"fleet": "pinecall", "worker": "pinecall/w.1"},
        [
            _s(
                "pinecall_worker_state",
                'fleet="pinecall",worker="pinecall/w.1",state="accepting"',
                "1x20",
            )
        ],
    ),
    "PinecallRoomsWaiting": (
        [_fleet("waiting", "2x20")],
        FLEET,
        [_fleet("waiting", "0x20")],
    ),
    "PinecallRoomsKeptInOffers": (
        [_fleet("in_offers", "1x20")],
        FLEET,
        # rooms in offers for moments, each opened: never a minute at a time
        [_fleet("in_offers", "0 1 0 1 0 1 0 1 0 1 0 1 0 1 0 1 0 1 0 1")],
    ),
    "PinecallRefusedAtAdmission": (
        [
            _s(
                "pinecall_admissions_total",
                'environment="production",fleet="pinecall",answer="fleet_full"',
                "0+1x20",
            )
        ],
        {"fleet": "pinecall", "answer": "fleet_full"},
        # admissions, and refusals long past (flat)
        [
            _s(
                "pinecall_admissions_total",
                'environment="production",fleet="pinecall",answer="admitted"',
                "0+5x20",
            ),
            _s(
                "pinecall_admissions_total",
                'environment="production",fleet="pinecall",answer="fleet_full"',
                "3x20",
            ),
        ],
    ),
    "PinecallWebhooksRefused": (
        [
            _s(
                "pinecall_webhooks_refused_total",
                'environment="production",reason="forged"',
                "0+1x20",
            )
        ],
        {"environment": "production", "reason": "forged"},
        [_s("pinecall_webhooks_refused_total", 'environment="production",reason="forged"', "4x20")],
    ),
    "PinecallCallLogWriteErrors": (
        [_s("pinecall_call_log_write_errors_total", "", "0+1x20")],
        {},
        [_s("pinecall_call_log_write_errors_total", "", "2x20")],
    ),
    "PinecallRecordingsFailed": (
        [_s("pinecall_recordings_total", 'environment="production",outcome="failed"', "0+1x20")],
        {"environment": "production"},
        # completed and kept ones grow, and a failure long past: quiet
        [
            _s(
                "pinecall_recordings_total",
                'environment="production",outcome="completed"',
                "0+3x20",
            ),
            _s("pinecall_recordings_total", 'environment="production",outcome="kept"', "0+1x20"),
            _s("pinecall_recordings_total", 'environment="production",outcome="failed"', "1x20"),
        ],
    ),
    "PinecallFollowUpsWaiting": (
        [_s("pinecall_followups", 'environment="production",what="waiting"', "2x20")],
        {"environment": "production"},
        [_s("pinecall_followups", 'environment="production",what="waiting"', "0x20")],
    ),
    "PinecallCallBacksNotReached": (
        # 3 of 4 call backs ended in 10 min not reached: past half
        [
            _s("pinecall_followups", 'environment="production",what="tries"', "4x20"),
            _s("pinecall_followups", 'environment="production",what="not_reached"', "3x20"),
        ],
        {"environment": "production"},
        # 3 of 3: too few to judge; and 1 of 6 below the line
        [
            _s("pinecall_followups", 'environment="production",what="tries"', "3x20"),
            _s("pinecall_followups", 'environment="production",what="not_reached"', "3x20"),
            _s("pinecall_followups", 'environment="sandbox",what="tries"', "6x20"),
            _s("pinecall_followups", 'environment="sandbox",what="not_reached"', "1x20"),
        ],
    ),
    "PinecallFirstAudioSlow": (
        # every turn's first audio between 5 and 10 s: p95 over the line
        _buckets(
            "pinecall_first_audio_seconds_bucket",
            {"1": "0x20", "5": "0x20", "10": "0+10x20", "+Inf": "0+10x20"},
        ),
        FLEET,
        _buckets(
            "pinecall_first_audio_seconds_bucket",
            {"1": "0+10x20", "5": "0+10x20", "10": "0+10x20", "+Inf": "0+10x20"},
        ),
    ),
}


def render(template: str, labels: dict[str, str]) -> str:
    """An annotation as Prometheus renders it: ``{{ $labels.x }}`` and the ``if eq $labels.x
    "k"`` / ``else if`` / ``else`` / ``end`` chains the rules use, nothing else."""
    out: list[str] = []
    chains: list[tuple[bool, bool]] = []  # (emitting now, a branch was taken)
    for token in re.split(r"({{.*?}})", template):
        if m := re.fullmatch(r'{{ (if|else if) eq \$labels\.(\w+) "([^"]*)" }}', token):
            hit = labels.get(m[2]) == m[3]
            if m[1] == "if":
                chains.append((hit, hit))
            else:
                taken = chains[-1][1]
                chains[-1] = (hit and not taken, taken or hit)
        elif token == "{{ else }}":
            chains[-1] = (not chains[-1][1], True)
        elif token == "{{ end }}":
            chains.pop()
        elif all(emitting for emitting, _ in chains):
            m = re.fullmatch(r"{{ \$labels\.(\w+) }}", token)
            out.append(labels[m[1]] if m else token)
    return "".join(out)


def test_the_charts_files_are_what_the_code_makes() -> None:
    stale = "stale: run .venv/bin/python -m pinecall_runtime.monitoring"
    assert (FILES / "alerts.yaml").read_text() == rules_yaml(), stale
    assert (FILES / "dashboard.json").read_text() == dashboard_json(), stale


def test_promtool_checks_the_rules() -> None:
    result = promtool("check", "rules", str(FILES / "alerts.yaml"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(ALERTS)} rules found" in result.stdout


def test_every_alert_has_a_unit_test_and_says_what_to_do() -> None:
    assert set(CASES) == {a.name for a in ALERTS}
    for a in ALERTS:
        assert a.todo, a.name
    # the advice is doctor's, not a copy: the full fleet's is the very text doctor says
    (full,) = [a for a in ALERTS if a.title == "fleet full"]
    assert full.todo == runbook.FULL


@pytest.mark.parametrize("name", sorted(CASES))
def test_promtool_fires_the_alert_when_it_should_and_not_when_it_should_not(
    name: str, tmp_path: Path
) -> None:
    (alert,) = [a for a in ALERTS if a.name == name]
    firing, labels, quiet = CASES[name]
    # past the longest `for` (5m) and the windows' first samples
    at = "15m"
    expected = {
        "exp_labels": {**labels, "severity": alert.severity},
        "exp_annotations": {
            "title": alert.title,
            "summary": render(alert.summary, labels),
            "description": render(alert.todo, labels),
        },
    }
    tests = {
        "rule_files": [str(FILES / "alerts.yaml")],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": firing,
                "alert_rule_test": [{"eval_time": at, "alertname": name, "exp_alerts": [expected]}],
            },
            {
                "interval": "1m",
                "input_series": quiet,
                "alert_rule_test": [{"eval_time": at, "alertname": name, "exp_alerts": []}],
            },
        ],
    }
    unit = tmp_path / f"{name}.test.yaml"
    unit.write_text(yaml.safe_dump(tests, sort_keys=False))
    result = promtool("test", "rules", str(unit))
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_name_reader_finds_series_not_functions_labels_or_keywords() -> None:
    expr = (
        'histogram_quantile(0.95, sum by (fleet, le) (rate(x_bucket{fleet=~"$fleet"}'
        '[$__rate_interval]))) > 5 and on(fleet) max by (fleet) (y{what="a"}) == 0'
    )
    assert metric_names(expr) == {"x_bucket", "y"}


def test_every_rule_names_only_registered_metrics() -> None:
    for a in ALERTS:
        assert metric_names(a.expr) <= QUERYABLE, a.name


def test_the_chart_carries_the_rules_and_the_dashboard(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    for cluster in ("production", "staging", "lab"):
        docs = rendered[cluster]
        (rule,) = [d for d in docs if d["kind"] == "PrometheusRule"]
        assert rule["spec"] == yaml.safe_load((FILES / "alerts.yaml").read_text())
        (board,) = [
            d
            for d in docs
            if d["kind"] == "ConfigMap" and d["metadata"]["labels"].get("grafana_dashboard") == "1"
        ]
        assert json.loads(board["data"]["pinecall.json"]) == dashboard()


def test_up_scrapes_each_process_that_serves_metrics_with_the_quick_holds(tmp_path: Path) -> None:
    """``up --prometheus``'s configuration: a job per process that serves /metrics (the
    stand-ins, the apps and the callers serve none), the rules with their quick holds, which
    promtool accepts."""
    from pinecall_runtime.monitoring import prometheus

    names = ["roster", "roster-1", "call-log", "worker-production", "overflow-sandbox", "chat"]
    names += ["livekit-production", "vendors", "booking-production-1", "console-sandbox"]
    assert {n: prometheus.job_of(n) for n in names} == {
        "roster": "roster",
        "roster-1": "roster",
        "call-log": "call-log",
        "worker-production": "worker",
        "overflow-sandbox": "overflow",
        "chat": "chat",
        "livekit-production": None,
        "vendors": None,
        "booking-production-1": None,
        "console-sandbox": None,
    }
    if not Path(prometheus.PROMETHEUS).is_file():
        pytest.fail("prometheus is missing: ./dev sync installs Debian's prometheus")
    config = prometheus.prepare(
        tmp_path, [("roster", "http://127.0.0.1:9"), ("worker-a", "http://127.0.0.1:8")]
    )
    written = yaml.safe_load(config.read_text())
    # Prometheus reads a relative rule file from the configuration's folder: none is relative
    assert written["rule_files"] == [str(tmp_path.resolve() / "alerts.yaml")]
    assert [j["job_name"] for j in written["scrape_configs"]] == ["roster", "worker-a"]
    assert written["scrape_configs"][1]["static_configs"] == [
        {"targets": ["127.0.0.1:8"], "labels": {"process": "worker"}}
    ]
    result = promtool("check", "config", str(config))
    assert result.returncode == 0, result.stdout + result.stderr
    quick = yaml.safe_load((tmp_path / "alerts.yaml").read_text())
    holds = {r["alert"]: r["for"] for r in quick["groups"][0]["rules"]}
    assert holds == {a.name: a.quick for a in ALERTS}
