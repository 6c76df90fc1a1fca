"""checkov on the rendered manifests, the prerequisites' manifests and terraform/, in one run
(checkov takes seconds to start; it runs once for the suite). Every finding is fixed or waived in
place with its reason: ``checkov.io/skip<N>: CKV_..=<reason>`` on a manifest, ``# checkov:skip=``
in a Terraform block; a waiver without a reason is a finding."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from .conftest import ROOT

CHECKOV = ROOT / ".tools" / "checkov" / "bin" / "checkov"  # ./dev sync installs it apart

# 420 s, past checkov's own 300 s (the module's fixture, counted in the first test that asks for
# it) and the manifests' rendering before it: at pytest-timeout's 300 s (pyproject.toml) its
# thread method would end the xdist worker with os._exit before subprocess.run's timeout could
# fail the test with checkov's output
pytestmark = pytest.mark.timeout(420)


@pytest.fixture(scope="module")
def checkov(manifests_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """checkov's JSON report, one entry per framework (kubernetes, terraform)."""
    assert CHECKOV.is_file(), "checkov is missing: run ./dev sync"
    manifests = tmp_path_factory.mktemp("checkov") / "manifests"
    shutil.copytree(manifests_dir, manifests)
    shutil.copy(ROOT / "deploy" / "prerequisites" / "kubeip.yaml", manifests / "kubeip.yaml")
    out = manifests.parent / "report"
    command = [str(CHECKOV), "--compact", "--skip-download", "--output", "json"]
    command += ["--output-file-path", str(out), "--framework", "kubernetes", "terraform"]
    command += ["--directory", str(manifests), "--directory", str(ROOT / "terraform")]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    report_file = out / "results_json.json"
    assert report_file.is_file(), result.stdout + result.stderr
    report = json.loads(report_file.read_text())
    return report if isinstance(report, list) else [report]


def _by_framework(report: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {entry["check_type"]: entry for entry in report}


@pytest.mark.parametrize("framework", ["kubernetes", "terraform"])
def test_checkov_finds_nothing(checkov: list[dict[str, Any]], framework: str) -> None:
    entry = _by_framework(checkov)[framework]
    failed = [
        f"{c['check_id']} {c['resource']} ({c['file_path']}): {c['check_name']}"
        for c in entry["results"]["failed_checks"]
    ]
    assert failed == []
    assert entry["summary"]["parsing_errors"] == 0
    assert entry["summary"]["passed"] > 0  # it read what it was given


@pytest.mark.parametrize("framework", ["kubernetes", "terraform"])
def test_every_waiver_says_why(checkov: list[dict[str, Any]], framework: str) -> None:
    skipped = _by_framework(checkov)[framework]["results"]["skipped_checks"]
    unexplained = [
        c["check_id"] for c in skipped if len(c["check_result"].get("suppress_comment") or "") < 20
    ]
    assert unexplained == []
