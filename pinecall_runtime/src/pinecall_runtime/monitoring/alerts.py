"""The alert rules: one per thing ``doctor`` checks that a graph can show, each saying what to do
in ``doctor``'s own words (:mod:`pinecall_runtime.doctor.runbook`).

Every expression names only metrics of the registry (:mod:`pinecall_contracts.metrics`); where a
service runs replicas, each says the same fleet (``max by``). The thresholds are the runtime's:
the roster's failing line for first audio (5 s), doctor's windows (10 minutes of refusals).
``promtool test rules`` holds each alert to series that fire it and series that do not
(``deploy/charts/pinecall/files/alerts.test.yaml``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import yaml

from pinecall_runtime.doctor import runbook
from pinecall_runtime.doctor.intake import NOT_REACHED_LEAST, NOT_REACHED_SHARE

Severity = Literal["critical", "warning", "info"]
FIRST_AUDIO_LINE_S = 5.0
"""First audio p95 over which a fleet's callers wait too long: the roster's failing line
(``pinecall_roster.domain.FAILING_FIRST_AUDIO_P95_S``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Alert:
    """One alert rule."""

    name: str
    title: str
    """How the report and a person say it (``fleet full``)."""
    expr: str
    hold: str
    """How long ``expr`` holds before it fires (the rule's ``for``)."""
    quick: str
    """The ``for`` of a run of minutes (``up --prometheus``): long enough that what passes in
    a healthy run (a room in offers for the second its worker takes to open it) stays quiet."""
    severity: Severity
    summary: str
    """What is wrong, with the alert's labels (``{{ $labels.fleet }}``)."""
    todo: str
    """What to do: doctor's advice."""


def _labels(text: str, **names: str) -> str:
    """A runbook text with its ``{name}`` places filled by the alert's labels."""
    return text.format(**{k: "{{ $labels." + v + " }}" for k, v in names.items()})


def _by_label(label: str, texts: dict[str, str], other: str) -> str:
    """One of ``texts`` chosen by the alert's ``label`` (a Go template), ``other`` for the rest."""
    chosen = "".join(
        ("{{ if" if i == 0 else "{{ else if") + f' eq $labels.{label} "{key}" }}}}{text}'
        for i, (key, text) in enumerate(texts.items())
    )
    return chosen + "{{ else }}" + other + "{{ end }}"


ALERTS: tuple[Alert, ...] = (
    Alert(
        name="PinecallFleetSilent",
        title="fleet silent",
        expr='max by (fleet) (pinecall_fleet{what="accepting"})'
        ' + max by (fleet) (pinecall_fleet{what="full"}) == 0',
        hold="1m",
        quick="5s",
        severity="critical",
        summary="fleet {{ $labels.fleet }} takes no call: no worker heard accepting or full; "
        "its callers wait 12 s, then go to the overflow",
        todo=_labels(runbook.SILENT, fleet="fleet")
        + "; if its workers are heard but cordoned: "
        + runbook.NO_CALL,
    ),
    Alert(
        name="PinecallFleetFull",
        title="fleet full",
        expr='max by (fleet) (pinecall_fleet{what="seats_free"}) == 0'
        ' and max by (fleet) (pinecall_fleet{what="seats"}) > 0',
        hold="2m",
        quick="5s",
        severity="warning",
        summary="fleet {{ $labels.fleet }} is full: none of its seats free; new callers hear the "
        "overflow",
        todo=runbook.FULL,
    ),
    Alert(
        name="PinecallWorkerFailing",
        title="worker failing",
        expr='max by (fleet, worker) (pinecall_worker_state{state="failing"}) == 1',
        hold="1m",
        quick="5s",
        severity="critical",
        summary="worker {{ $labels.worker }} of {{ $labels.fleet }} is failing (half its calls "
        "of a minute ended in error, or its first audio p95 is over 5 s)",
        todo=_labels(runbook.FAILING, worker="worker"),
    ),
    Alert(
        name="PinecallRoomsWaiting",
        title="rooms waiting",
        expr='max by (fleet) (pinecall_fleet{what="waiting"}) > 0',
        hold="0s",
        quick="0s",
        severity="info",
        summary="rooms of {{ $labels.fleet }} waited for a worker in 10 min "
        "(offered again, or sent to the overflow for want of an open): a worker or LiveKit "
        "dropped an offer, or a cordon or a drain declined it",
        todo=runbook.WAITED,
    ),
    Alert(
        name="PinecallRoomsKeptInOffers",
        title="rooms kept in offers",
        expr='max by (fleet) (pinecall_fleet{what="in_offers"}) > 0',
        hold="1m",
        quick="20s",
        severity="critical",
        summary="rooms of {{ $labels.fleet }} kept in offers a minute and more: their callers wait",
        todo="pinecall-runtime doctor names each room and its call; "
        + runbook.KEPT.format(call="CALL"),
    ),
    Alert(
        name="PinecallRefusedAtAdmission",
        title="refusals at admission",
        expr='sum by (fleet, answer) (increase(pinecall_admissions_total{answer!="admitted"}[10m]))'
        " > 0",
        hold="0s",
        quick="0s",
        severity="warning",
        summary="callers of {{ $labels.fleet }} refused at admission in 10 min "
        "({{ $labels.answer }}): a refusal leaves no call record",
        todo=_by_label("answer", runbook.ADMISSION, "see the dispatcher's logs"),
    ),
    Alert(
        name="PinecallWebhooksRefused",
        title="webhooks refused",
        expr="sum by (environment, reason) (increase(pinecall_webhooks_refused_total[10m])) > 0",
        hold="0s",
        quick="0s",
        severity="warning",
        summary="LiveKit webhooks of {{ $labels.environment }} refused in 10 min "
        "({{ $labels.reason }}): their events are lost",
        todo=_by_label("reason", runbook.WEBHOOKS, runbook.WEBHOOKS_OTHER),
    ),
    Alert(
        name="PinecallCallLogWriteErrors",
        title="call-log write errors",
        expr="sum(increase(pinecall_call_log_write_errors_total[5m])) > 0",
        hold="0s",
        quick="0s",
        severity="critical",
        summary="call-log answered writes with 5xx in the last 5 min",
        todo=runbook.WRITE_ERRORS,
    ),
    Alert(
        name="PinecallRecordingsFailed",
        title="recordings failed",
        expr='sum by (environment) (increase(pinecall_recordings_total{outcome="failed"}[10m]))'
        " > 0",
        hold="0s",
        quick="0s",
        severity="warning",
        summary="recordings of {{ $labels.environment }} not completed in 10 min "
        "(call.recording_failed): those calls have no recording, or only part of one",
        todo=runbook.RECORDINGS_FAILED,
    ),
    Alert(
        name="PinecallFollowUpsWaiting",
        title="follow-ups waiting",
        expr='max by (environment) (pinecall_followups{what="waiting"}) > 0',
        hold="0s",
        quick="0s",
        severity="info",
        summary="follow-ups of {{ $labels.environment }} wait to be dialled (callers asked to be "
        "called back)",
        todo=runbook.FOLLOW_UPS_WAITING.format(fleet="its fleet", full=runbook.FULL),
    ),
    Alert(
        name="PinecallCallBacksNotReached",
        title="call backs not reached",
        expr='max by (environment) (pinecall_followups{what="not_reached"}) >= '
        f"{NOT_REACHED_SHARE:g} * "
        'max by (environment) (pinecall_followups{what="tries"}) '
        'and max by (environment) (pinecall_followups{what="tries"}) >= '
        f"{NOT_REACHED_LEAST}",
        hold="0s",
        quick="0s",
        severity="warning",
        summary="call backs of {{ $labels.environment }} not reached: "
        f"{NOT_REACHED_SHARE:.0%} or more of those ended in 10 min never rang",
        todo=runbook.NOT_REACHED,
    ),
    Alert(
        name="PinecallFirstAudioSlow",
        title="first audio p95 over the line",
        expr="histogram_quantile(0.95, sum by (fleet, le) "
        "(rate(pinecall_first_audio_seconds_bucket[5m]))) > " + f"{FIRST_AUDIO_LINE_S:g}",
        hold="5m",
        quick="20s",
        severity="warning",
        summary=f"first audio p95 of {{{{ $labels.fleet }}}} is over {FIRST_AUDIO_LINE_S:g} s, the "
        "roster's failing line",
        todo=runbook.FIRST_AUDIO.format(worker="WORKER"),
    ),
)
TITLES: dict[str, str] = {a.name: a.title for a in ALERTS}

HEADER = (
    "# Made by `python -m pinecall_runtime.monitoring` from pinecall_runtime/monitoring/alerts.py\n"
    "# (the advice: pinecall_runtime/doctor/runbook.py, doctor's): edit those, never this.\n"
    "# A Prometheus rules file (rule_files:); the chart's PrometheusRule carries the same groups.\n"
)


def rules(quick: bool = False) -> dict[str, Any]:
    """The rules document (``groups:``); ``quick``: each rule's ``for`` is its :attr:`Alert.quick`
    (``up --prometheus`` runs them for minutes, not hours)."""
    return {
        "groups": [
            {
                "name": "pinecall",
                "rules": [
                    {
                        "alert": a.name,
                        "expr": a.expr,
                        "for": a.quick if quick else a.hold,
                        "labels": {"severity": a.severity},
                        "annotations": {
                            "title": a.title,
                            "summary": a.summary,
                            "description": a.todo,
                        },
                    }
                    for a in ALERTS
                ],
            }
        ]
    }


def rules_yaml(quick: bool = False) -> str:
    """:func:`rules` as the YAML of a rules file, its header first."""
    body = yaml.safe_dump(rules(quick), sort_keys=False, width=100, allow_unicode=True)
    return HEADER + body
