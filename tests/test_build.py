"""The build layout agrees with the workspace: BUILD files, Pants macros and import contracts.

BUILD files and ``build-support/macros.py`` are Python syntax that Pants evaluates with its own
symbols in scope. Here they are parsed with :mod:`ast`, then run with stand-ins for those symbols
that record every call, so the targets and visibility rules each distribution gets are checked as
data: which macro each distribution calls, what a service's image holds, and who may import whom
(evaluated the way Pants' visibility backend reads the rules: the nearest BUILD file's rule set,
first matching rule wins, ``!`` denies, a dependency needs both ends to allow it).

``.importlinter`` is checked against the packages actually found under every ``src/``.
"""

from __future__ import annotations

import ast
import configparser
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
MACROS = ROOT / "build-support" / "macros.py"
TOOLS = ("pinecall_runtime", "loadlab")
TEST_KIT = "tests/kit"
MACRO_OF_KIND = {
    "libs": "pinecall_library",
    "services": "pinecall_service",
    "tool": "pinecall_tool",
    "kit": "pinecall_test_kit",
}

# The BUILD symbols the prelude and the BUILD files may use; a symbol missing here is a NameError
# below, which says to add it.
PANTS_SYMBOLS = (
    "python_sources",
    "python_tests",
    "python_test_utils",
    "python_requirements",
    "resources",
    "files",
    "pex_binary",
    "docker_image",
    "shell_source",
    "__dependencies_rules__",
    "__dependents_rules__",
)
RULE_DIRECTIVES = ("__dependencies_rules__", "__dependents_rules__")
THIRD_PARTY = "reqs#msgspec"  # the address path Pants gives `//:reqs#msgspec`


# -- the workspace -------------------------------------------------------------------------------


def _distributions() -> dict[str, str]:
    """Every distribution directory (relative, posix) and its kind: libs, services, tool or kit."""
    found = {
        pyproject.parent.relative_to(ROOT).as_posix(): group
        for group in ("libs", "services")
        for pyproject in sorted((ROOT / group).glob("*/pyproject.toml"))
    }
    found.update({tool: "tool" for tool in TOOLS})
    found[TEST_KIT] = "kit"
    return found


def _packages(dist: str) -> list[str]:
    """The import packages under a distribution's ``src/``."""
    return sorted(init.parent.name for init in (ROOT / dist / "src").glob("*/__init__.py"))


def _service_dirs() -> list[str]:
    services = ROOT / "services"
    return sorted(
        child.relative_to(ROOT).as_posix()
        for child in services.iterdir()
        if child.is_dir() and not child.name.startswith((".", "_"))
    )


def _build_files() -> list[Path]:
    """Every BUILD file of the repository, hidden directories (.venv, .git) left out."""
    return sorted(
        path
        for path in ROOT.rglob("BUILD")
        if not any(part.startswith(".") for part in path.relative_to(ROOT).parts)
    )


def _module_of(dist: str) -> str:
    """A source file of ``dist`` (its first package's ``__init__.py``), as a path Pants matches."""
    packages = _packages(dist)
    assert packages, f"{dist}/src holds no package"
    return f"{dist}/src/{packages[0]}/__init__.py"


DISTRIBUTIONS = _distributions()
SERVICES = [dist for dist, kind in DISTRIBUTIONS.items() if kind == "services"]
ANOTHER_SERVICE = "services/another/src/pinecall_another/app.py"  # one with no BUILD file yet


# -- ast -----------------------------------------------------------------------------------------


def _parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def _top_level_calls(tree: ast.Module) -> list[tuple[str, dict[str, Any]]]:
    """``symbol(name=..., ...)`` statements at the top of a BUILD file, with literal keywords."""
    calls = []
    for statement in tree.body:
        if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
            call = statement.value
            if isinstance(call.func, ast.Name):
                keywords = {
                    kw.arg: ast.literal_eval(kw.value) for kw in call.keywords if kw.arg is not None
                }
                calls.append((call.func.id, keywords))
    return calls


@pytest.mark.parametrize(
    "path", [*_build_files(), MACROS], ids=lambda p: p.relative_to(ROOT).as_posix()
)
def test_build_files_parse_and_import_nothing(path: Path) -> None:
    tree = _parse(path)
    imports = [node for node in ast.walk(tree) if isinstance(node, ast.Import | ast.ImportFrom)]
    assert not imports, f"{path.name}: Pants refuses import statements in BUILD files and preludes"


@pytest.mark.parametrize("dist", sorted(DISTRIBUTIONS))
def test_every_distribution_calls_its_macro_with_its_name(dist: str) -> None:
    build = ROOT / dist / "BUILD"
    assert build.is_file(), f"{dist} has no BUILD file"
    macro = MACRO_OF_KIND[DISTRIBUTIONS[dist]]
    calls = [(symbol, kw.get("name")) for symbol, kw in _top_level_calls(_parse(build))]
    assert calls == [(macro, PurePosixPath(dist).name)]


@pytest.mark.parametrize("service", _service_dirs())
def test_every_service_is_declared_with_pinecall_service(service: str) -> None:
    build = ROOT / service / "BUILD"
    assert build.is_file(), f"{service} has no BUILD file"
    symbols = [symbol for symbol, _ in _top_level_calls(_parse(build))]
    assert symbols == ["pinecall_service"]


def test_macros_define_the_three_macros() -> None:
    defined = {node.name for node in _parse(MACROS).body if isinstance(node, ast.FunctionDef)}
    assert {"pinecall_library", "pinecall_service", "pinecall_tool"} <= defined


# -- the BUILD files, run with stand-ins for Pants' symbols --------------------------------------


@dataclass
class Pants:
    """What the BUILD files declared: targets and rule sets, by the BUILD file's directory."""

    targets: dict[str, list[tuple[str, dict[str, Any]]]] = field(
        default_factory=lambda: defaultdict(list)
    )
    rules: dict[tuple[str, str], tuple[Any, ...]] = field(default_factory=dict)
    current: str = ""

    def symbol(self, name: str) -> Callable[..., None]:
        def call(*args: Any, **kwargs: Any) -> None:
            if name in RULE_DIRECTIVES:
                assert (self.current, name) not in self.rules, f"{self.current}: {name} twice"
                self.rules[self.current, name] = args
            else:
                self.targets[self.current].append((name, kwargs))

        return call

    def targets_of(self, build_dir: str) -> dict[str, dict[str, Any]]:
        """Targets of one BUILD file by name, each with its type under ``"type"``."""
        return {kw["name"]: {"type": t, **kw} for t, kw in self.targets[build_dir]}

    def allows(self, importer: str, imported: str) -> bool:
        """Whether the file ``importer`` may depend on ``imported``: both ends must allow it."""
        forward = self.verdict("__dependencies_rules__", owner=importer, other=imported)
        backward = self.verdict("__dependents_rules__", owner=imported, other=importer)
        return forward and backward

    def verdict(self, directive: str, owner: str, other: str) -> bool:
        """What the rules ``owner``'s BUILD file declares say of the file at the other end."""
        base = self._declaring_dir(directive, owner)
        if base is None:
            return True  # no rules in play: Pants allows
        for rule_set in self.rules[base, directive]:
            selector, *rules = rule_set
            assert selector == "*", f"{base}: this test reads only the '*' selector"
            for rule in _flatten(rules):
                if _glob_matches(rule.lstrip("!?"), other, base):
                    return not rule.startswith("!")
        raise AssertionError(f"{base}: no {directive} rule matches {other}; Pants would refuse it")

    def _declaring_dir(self, directive: str, path: str) -> str | None:
        """The nearest directory at or above ``path`` whose BUILD file declares ``directive``."""
        for parent in PurePosixPath(path).parents:
            candidate = "" if str(parent) == "." else str(parent)
            if (candidate, directive) in self.rules:
                return candidate
        return None


def _flatten(rules: Any) -> Iterator[str]:
    for rule in rules:
        if isinstance(rule, str):
            yield rule
        else:
            yield from _flatten(rule)


def _glob_matches(glob: str, path: str, base: str) -> bool:
    """The visibility globs the macros use: ``*``, ``//tree/**``, ``/**``, exact anchored paths."""
    if glob == "*":
        return True
    if glob.startswith("//"):
        anchored = glob[2:]
    elif glob.startswith("/"):
        anchored = f"{base}/{glob[1:]}".lstrip("/")
    else:
        raise AssertionError(f"this test does not read the floating glob {glob!r}")
    if anchored == "**":
        return True
    if anchored.endswith("/**"):
        tree = anchored[: -len("/**")]
        assert "*" not in tree, f"this test does not read {glob!r}"
        return path == tree or path.startswith(tree + "/")
    assert "*" not in anchored, f"this test does not read {glob!r}"
    return path == anchored


@pytest.fixture(scope="module")
def pants() -> Pants:
    pants = Pants()
    prelude: dict[str, Any] = {name: pants.symbol(name) for name in PANTS_SYMBOLS}
    exec(compile(MACROS.read_text(), str(MACROS), "exec"), prelude)
    public = {name: value for name, value in prelude.items() if not name.startswith("_")}
    for build in _build_files():
        relative = build.parent.relative_to(ROOT).as_posix()
        pants.current = "" if relative == "." else relative
        namespace = {**public, **{name: pants.symbol(name) for name in PANTS_SYMBOLS}}
        exec(compile(build.read_text(), str(build), "exec"), namespace)
    return pants


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
    assert module.split(".")[0] in _packages(dist)
    assert (ROOT / dist / "src" / (module.replace(".", "/") + ".py")).is_file()


@pytest.mark.parametrize("service", SERVICES)
def test_services_are_not_importable_from_each_other(pants: Pants, service: str) -> None:
    mine = _module_of(service)
    others = [_module_of(other) for other in SERVICES if other != service] + [ANOTHER_SERVICE]
    for other in others:
        # The service's own BUILD file says both, whether or not the other has a BUILD file yet.
        assert not pants.verdict("__dependencies_rules__", owner=mine, other=other)
        assert not pants.verdict("__dependents_rules__", owner=mine, other=other)
        assert not pants.allows(mine, other), f"{service} may import {other}"
        assert not pants.allows(other, mine), f"{other} may import {service}"


# The test kit is no production code (it is imported by tests only).
@pytest.mark.parametrize(
    "dist", [d for d, k in DISTRIBUTIONS.items() if d != "loadlab" and k != "kit"]
)
def test_loadlab_is_not_importable_from_production(pants: Pants, dist: str) -> None:
    lab, production = _module_of("loadlab"), _module_of(dist)
    assert not pants.verdict("__dependents_rules__", owner=lab, other=production)
    assert not pants.verdict("__dependencies_rules__", owner=production, other=lab)
    assert not pants.allows(production, lab)


def test_the_dependency_direction(pants: Pants) -> None:
    contracts = _module_of("libs/contracts")
    servicekit = _module_of("libs/servicekit")
    cli = _module_of("pinecall_runtime")
    lab = _module_of("loadlab")
    e2e = "tests/test_e2e.py"
    allowed = [
        (contracts, THIRD_PARTY),
        (servicekit, contracts),
        (cli, contracts),
        (cli, servicekit),
        (lab, contracts),
        (lab, servicekit),
        *[(_module_of(s), lib) for s in SERVICES for lib in (contracts, servicekit)],
        *[(_module_of(s), THIRD_PARTY) for s in SERVICES],
        *[(f"{s}/tests/test_x.py", _module_of(s)) for s in SERVICES],
        *[(lab, _module_of(s)) for s in SERVICES],
        *[(e2e, _module_of(d)) for d in DISTRIBUTIONS],
    ]
    denied = [
        (contracts, servicekit),
        (contracts, cli),
        (servicekit, cli),
        (cli, lab),
        *[(contracts, _module_of(s)) for s in SERVICES],
        *[(servicekit, _module_of(s)) for s in SERVICES],
        *[(cli, _module_of(s)) for s in SERVICES],
        *[(_module_of(s), cli) for s in SERVICES],
        *[(_module_of(s), e2e) for s in SERVICES],
    ]
    assert [pair for pair in allowed if not pants.allows(*pair)] == []
    assert [pair for pair in denied if pants.allows(*pair)] == []
    # Each importer's own BUILD file says what it may not import, not only the other end's.
    refused_by_importer = [
        (a, b) for a, b in denied if not pants.verdict("__dependencies_rules__", owner=a, other=b)
    ]
    assert refused_by_importer == denied


# -- .importlinter -------------------------------------------------------------------------------


def _importlinter() -> configparser.ConfigParser:
    config = configparser.ConfigParser()
    assert config.read(ROOT / ".importlinter"), ".importlinter is missing"
    return config


def _modules(config: configparser.ConfigParser, section: str, key: str) -> set[str]:
    return {line.strip() for line in config[section][key].splitlines() if line.strip()}


def test_importlinter_root_packages_are_the_workspace_packages() -> None:
    found = {package for dist in DISTRIBUTIONS for package in _packages(dist)}
    assert _modules(_importlinter(), "importlinter", "root_packages") == found


SERVICE_LISTS = [
    ("importlinter:contract:services-independent", "modules"),
    ("importlinter:contract:contracts-import-nothing", "forbidden_modules"),
    ("importlinter:contract:loadlab-not-in-production", "source_modules"),
    ("importlinter:contract:servicekit-below-services", "forbidden_modules"),
    ("importlinter:contract:cli-loads-services-by-entry-point", "forbidden_modules"),
]


def test_the_services_contract_is_an_independence_contract() -> None:
    assert _importlinter()["importlinter:contract:services-independent"]["type"] == "independence"


@pytest.mark.parametrize(("section", "key"), SERVICE_LISTS, ids=[s for s, _ in SERVICE_LISTS])
def test_every_service_package_is_in_the_contracts_that_list_services(
    section: str, key: str
) -> None:
    services = {package for service in SERVICES for package in _packages(service)}
    assert services, "no service package found"
    assert services <= _modules(_importlinter(), section, key)
