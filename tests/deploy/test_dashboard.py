"""The dashboard (issue 22, acceptance 5): it matches the schema of Grafana's JSON model kept in
deploy/schemas, its panels do not overlap, its queries parse (Debian's promtool, from ``./dev
sync``) and every query names only metrics of the registry (``pinecall_contracts.metrics``). That
the chart carries it: test_monitoring.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from pinecall_contracts.metrics import QUERYABLE
from pinecall_runtime.monitoring.dashboard import dashboard

from .conftest import FILES, ROOT, metric_names, promtool

SCHEMA = ROOT / "deploy" / "schemas" / "grafana-dashboard.json"


def _queries() -> list[tuple[str, str]]:
    return [
        (panel["title"], target["expr"])
        for panel in dashboard()["panels"]
        for target in panel.get("targets", [])
    ]


def test_every_dashboard_query_names_only_registered_metrics() -> None:
    queries = _queries()
    assert len(queries) > 20
    for title, expr in queries:
        names = metric_names(expr)
        assert names, (title, expr)
        assert names <= QUERYABLE, (title, sorted(names - QUERYABLE))


def test_every_dashboard_query_parses(tmp_path: Path) -> None:
    """promtool parses each query as a recording rule's expression (Grafana's variables set)."""
    rules = {
        "groups": [
            {
                "name": "dashboard",
                "rules": [
                    {
                        "record": f"dashboard:query{i}",
                        "expr": expr.replace("$__rate_interval", "1m").replace("$fleet", ".*"),
                    }
                    for i, (_, expr) in enumerate(_queries())
                ],
            }
        ]
    }
    file = tmp_path / "queries.yaml"
    file.write_text(yaml.safe_dump(rules))
    result = promtool("check", "rules", str(file))
    assert result.returncode == 0, result.stdout + result.stderr


def _check_jsonschema(files: list[Path]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(Path(sys.executable).parent / "check-jsonschema"), "--schemafile", str(SCHEMA)]
        + [str(f) for f in files],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_dashboard_matches_grafanas_json_model(tmp_path: Path) -> None:
    result = _check_jsonschema([FILES / "dashboard.json"])
    assert result.returncode == 0, result.stdout + result.stderr
    # the schema refuses what Grafana would: a panel with no type
    bad: dict[str, Any] = json.loads((FILES / "dashboard.json").read_text())
    del bad["panels"][1]["type"]
    wrong = tmp_path / "bad.json"
    wrong.write_text(json.dumps(bad))
    assert _check_jsonschema([wrong]).returncode != 0


def test_the_panels_do_not_overlap_on_the_grid() -> None:
    taken: set[tuple[int, int]] = set()
    for panel in dashboard()["panels"]:
        g = panel["gridPos"]
        cells = {
            (x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])
        }
        assert not cells & taken, panel["title"]
        assert g["x"] + g["w"] <= 24
        taken |= cells
