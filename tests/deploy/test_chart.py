"""The chart, checked by the real tools: helm 4 lints and renders every cluster's values, the
manifests are valid Kubernetes (kubernetes-validate, strict) and the custom resources match the
schemas kept in deploy/schemas (check-jsonschema)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from .conftest import CHART, CLUSTERS, POSTGRES_CHART, ROOT

KUBERNETES = "1.33.0"  # GKE's regular channel; preStop's sleep is beta (on) from 1.30
SCHEMAS = ROOT / "deploy" / "schemas"
CUSTOM = {
    "ScaledObject": SCHEMAS / "keda-scaledobject.json",
    "TriggerAuthentication": SCHEMAS / "keda-triggerauthentication.json",
    "Cluster": SCHEMAS / "cnpg-cluster.json",
    "PrometheusRule": SCHEMAS / "prometheus-prometheusrule.json",
}


@pytest.mark.parametrize("cluster", CLUSTERS)
def test_helm_lint_passes_strict_for_every_cluster(helm: Callable[..., str], cluster: str) -> None:
    values = ROOT / "deploy" / "values" / f"{cluster}.yaml"
    helm("lint", "--strict", str(CHART), "--values", str(values), "--namespace", "pinecall")


def test_helm_lint_passes_for_the_postgres_chart(helm: Callable[..., str]) -> None:
    helm("lint", "--strict", str(POSTGRES_CHART))


def test_the_schema_refuses_a_misspelt_ceiling(helm: Callable[..., str], tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("workers:\n  worker:\n    scaled:\n      production: {seats: 32, mots: 35}\n")
    with pytest.raises(AssertionError, match="additional properties 'mots' not allowed"):
        helm("template", "x", str(CHART), "--values", str(bad))


@pytest.mark.parametrize("cluster", [*CLUSTERS, "postgres"])
def test_the_manifests_are_valid_kubernetes(
    rendered: dict[str, list[dict[str, Any]]], cluster: str
) -> None:
    invalid = []
    for doc in rendered[cluster]:
        if doc["kind"] in CUSTOM:
            continue
        try:
            kubernetes_validate.validate(doc, KUBERNETES, strict=True)
        except kubernetes_validate.ValidationError as exc:
            invalid.append(f"{doc['kind']}/{doc['metadata']['name']}: {exc.message}")
    assert invalid == []


def _check_jsonschema(schema: Path, files: list[Path]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(Path(sys.executable).parent / "check-jsonschema"), "--schemafile", str(schema)]
        + [str(f) for f in files],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("kind", sorted(CUSTOM))
def test_the_custom_resources_match_their_schemas(manifests_dir: Path, kind: str) -> None:
    files = sorted(manifests_dir.glob(f"*/*-{kind}-*.yaml"))
    assert files, f"no {kind} rendered"
    result = _check_jsonschema(CUSTOM[kind], files)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_kind_rendered_is_one_kubernetes_or_a_schema_here_knows(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    kinds = {doc["kind"] for docs in rendered.values() for doc in docs}
    unknown = set()
    for kind in kinds - set(CUSTOM):
        doc = next(d for docs in rendered.values() for d in docs if d["kind"] == kind)
        try:
            kubernetes_validate.validate(doc, KUBERNETES, strict=True)
        except kubernetes_validate.SchemaNotFoundError:
            unknown.add(kind)
    assert unknown == set()


def test_the_keda_schema_refuses_a_number_where_keda_wants_a_string(
    manifests_dir: Path, tmp_path: Path
) -> None:
    (source,) = sorted(manifests_dir.glob("production/*-ScaledObject-*-scaled-production.yaml"))
    doc = yaml.safe_load(source.read_text())
    doc["spec"]["triggers"][0]["metadata"]["targetValue"] = 1  # KEDA's metadata: strings only
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(doc))
    assert _check_jsonschema(CUSTOM["ScaledObject"], [bad]).returncode != 0
