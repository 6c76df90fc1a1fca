"""terraform/: formatted (``terraform fmt -check``, where a terraform binary is on PATH), parsed
by python-hcl2 always, and holding the seed's shape: a core pool, a worker pool of e2-standard-8
autoscaled from 0 to ``workers_max``, the SIP address, pinned versions. ``terraform validate``
needs the Google provider from the internet and is not run here."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import hcl2
import pytest
from hcl2.utils import SerializationOptions

from .conftest import ROOT

TERRAFORM = ROOT / "terraform"
PLAIN = SerializationOptions(with_comments=False, explicit_blocks=False, strip_string_quotes=True)


def _load(path: Path) -> dict[str, Any]:
    with path.open() as handle:
        parsed: dict[str, Any] = hcl2.load(handle, serialization_options=PLAIN)
    return parsed


def _files() -> list[Path]:
    return sorted(TERRAFORM.rglob("*.tf"))


@pytest.fixture(scope="module")
def module() -> dict[str, Any]:
    """The root module's blocks, each file's merged: {"resource": {type: {name: body}}, ...}."""
    merged: dict[str, Any] = {}
    for path in sorted(TERRAFORM.glob("*.tf")):
        for block, items in _load(path).items():
            if block == "resource":
                for item in items:
                    for kind, named in item.items():
                        merged.setdefault("resource", {}).setdefault(kind, {}).update(named)
            elif block == "variable":
                for item in items:
                    merged.setdefault("variable", {}).update(item)
            else:
                merged.setdefault(block, []).extend(items)
    return merged


@pytest.mark.parametrize("path", _files(), ids=lambda p: p.relative_to(TERRAFORM).as_posix())
def test_every_file_parses(path: Path) -> None:
    assert _load(path)


def test_terraform_fmt_check() -> None:
    terraform = shutil.which("terraform")
    if terraform is None:
        pytest.skip("no terraform binary on PATH: fmt is not checked (the HCL is still parsed)")
    result = subprocess.run(
        [terraform, "fmt", "-check", "-recursive", "-diff", str(TERRAFORM)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout


def test_providers_are_pinned_to_one_version(module: dict[str, Any]) -> None:
    (terraform,) = module["terraform"]
    (providers,) = terraform["required_providers"]
    assert providers
    for name, requirement in providers.items():
        assert requirement["version"].startswith("= "), f"{name}: {requirement['version']}"


def _pool(module: dict[str, Any], name: str) -> dict[str, Any]:
    pool: dict[str, Any] = module["resource"]["google_container_node_pool"][name]
    return pool


def test_the_worker_pool_is_e2_standard_8_from_0_to_workers_max(module: dict[str, Any]) -> None:
    pool = _pool(module, "workers")
    (node,) = pool["node_config"]
    assert node["machine_type"] == "${var.workers_machine_type}"
    assert module["variable"]["workers_machine_type"]["default"] == "e2-standard-8"
    (autoscaling,) = pool["autoscaling"]
    assert autoscaling == {"min_node_count": 0, "max_node_count": "${var.workers_max}"}
    (taint,) = node["taint"]
    assert taint == {"key": "pinecall.dev/pool", "value": "workers", "effect": "NO_SCHEDULE"}


def test_the_core_pool_has_the_sip_address_and_kubeips_identity(module: dict[str, Any]) -> None:
    (node,) = _pool(module, "core")["node_config"]
    assert node["labels"]  # kubeip's DaemonSet selects the core node by its label
    address = module["resource"]["google_compute_address"]["sip"]
    assert address["address_type"] == "EXTERNAL"
    binding = module["resource"]["google_service_account_iam_member"]["kubeip_workload_identity"]
    assert binding["role"] == "roles/iam.workloadIdentityUser"


def test_the_example_uses_the_module() -> None:
    (modules,) = _load(TERRAFORM / "examples" / "production" / "main.tf")["module"]
    assert modules["pinecall"]["source"] == "../.."
