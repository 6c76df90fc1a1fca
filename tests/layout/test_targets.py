"""What each distribution's macro makes of it: a service's sources, tests, PEX and image of that
PEX; an image that runs as non-root on its port; a PEX whose entry point is its own module."""

from __future__ import annotations

import pytest

from .conftest import (
    DISTRIBUTIONS,
    ROOT,
    SERVICES,
    Pants,
    packages_of,
)


@pytest.mark.parametrize("service", SERVICES)
def test_a_service_gets_sources_tests_a_pex_and_an_image_of_that_pex(
    pants: Pants, service: str
) -> None:
    targets = pants.targets_of(service)
    types = {target["type"] for target in targets.values()}
    assert {"python_sources", "python_tests", "pex_binary", "docker_image"} <= types
    (pex,) = [t for t in targets.values() if t["type"] == "pex_binary"]
    (image,) = [t for t in targets.values() if t["type"] == "docker_image"]
    assert f":{pex['name']}" in image["dependencies"]
    assert any(pex["output_path"] in line for line in image["instructions"] if "COPY" in line)


@pytest.mark.parametrize("dist", [*SERVICES, "loadlab"])
def test_an_image_runs_as_non_root_on_its_port_with_its_command(pants: Pants, dist: str) -> None:
    (image,) = [t for t in pants.targets_of(dist).values() if t["type"] == "docker_image"]
    keywords = [line.split(" ", 1)[0] for line in image["instructions"]]
    assert keywords.index("USER") < keywords.index("ENTRYPOINT"), "the user is set before it runs"
    assert any(line == "USER 10001:10001" for line in image["instructions"])
    assert any(line.startswith("EXPOSE ") for line in image["instructions"]), (
        f"{dist}/BUILD: port= is missing (tests/test_images.py says which)"
    )
    assert image["instructions"][-1].startswith("CMD [")


@pytest.mark.parametrize("dist", [d for d, k in DISTRIBUTIONS.items() if k in ("services", "tool")])
def test_a_pex_entry_point_is_a_module_of_its_own_distribution(pants: Pants, dist: str) -> None:
    (pex,) = [t for t in pants.targets_of(dist).values() if t["type"] == "pex_binary"]
    module, _, function = pex["entry_point"].partition(":")
    assert function, "entry points name the click group: module:function"
    assert module.split(".")[0] in packages_of(dist)
    path = ROOT / dist / "src" / module.replace(".", "/")
    assert path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()
