"""The build layout agrees with the workspace: BUILD files, Pants macros and import contracts.

BUILD files and ``build-support/macros.py`` are Python syntax that Pants evaluates with its own
symbols in scope. Here they are parsed with :mod:`ast`, then run with stand-ins for those symbols
that record every call, so the targets and visibility rules each distribution gets are checked as
data: which macro each distribution calls, what a service's image holds, and who may import whom
(evaluated the way Pants' visibility backend reads the rules: the nearest BUILD file's rules, the
first rule set whose selector picks the file, its first matching rule wins, ``!`` denies, a
dependency needs both ends to allow it). Every import in the repository is checked against them.

``.importlinter`` is checked against the packages actually found under every ``src/``, and
lint-imports' own contract classes are run over the same pairs of modules as the Pants rules:
the two must give one answer for each.
"""

from __future__ import annotations

import ast
import configparser
import re
import sys
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


def test_macros_define_a_macro_for_each_kind() -> None:
    defined = {node.name for node in _parse(MACROS).body if isinstance(node, ast.FunctionDef)}
    assert set(MACRO_OF_KIND.values()) <= defined


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
        """What the rules ``owner``'s BUILD file declares say of the file at the other end: the
        first rule set whose selector matches ``owner``, then its first rule matching ``other``."""
        base = self._declaring_dir(directive, owner)
        if base is None:
            return True  # no rules in play: Pants allows
        for rule_set in self.rules[base, directive]:
            selector, *rules = rule_set
            if not _selects(selector, owner, base):
                continue
            for rule in _flatten(rules):
                if _glob_matches(rule.lstrip("!?"), other, base):
                    return not rule.startswith("!")
            raise AssertionError(f"{base}: no {directive} rule matches {other}; Pants refuses it")
        raise AssertionError(f"{base}: no {directive} rule set selects {owner}; Pants refuses it")

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


def _selects(selector: Any, path: str, base: str) -> bool:
    """Whether a rule set's selector picks the file at ``path``: ``"*"``, ``{"path": glob}``, or a
    tuple of them (any)."""
    if selector == "*":
        return True
    if isinstance(selector, dict):
        assert set(selector) == {"path"}, f"this test reads only path selectors: {selector!r}"
        return _glob_matches(selector["path"], path, base)
    if isinstance(selector, tuple | list):
        return any(_selects(one, path, base) for one in selector)
    raise AssertionError(f"this test does not read the selector {selector!r}")


def _glob_matches(glob: str, path: str, base: str) -> bool:
    """A visibility path glob, as Pants reads one: ``//`` anchors it at the repository's root,
    ``/`` at the BUILD file's directory; ``*`` is any name within one directory, ``**`` any path,
    and ``x/**`` is ``x`` and everything under it. A lone ``*`` matches everything."""
    if glob == "*":
        return True
    if glob.startswith("//"):
        anchored = glob[2:]
    elif glob.startswith("/"):
        anchored = f"{base}/{glob[1:]}".lstrip("/")
    else:
        raise AssertionError(f"this test does not read the floating glob {glob!r}")
    return re.fullmatch(_glob_regex(anchored), path) is not None


def _glob_regex(glob: str) -> str:
    """``glob`` as a regular expression of a whole path."""
    parts = []
    for i, part in enumerate(glob.split("/")):
        sep = "/" if i else ""
        if part == "**":
            parts.append(f"(?:{sep}.*)?")
        else:
            assert "**" not in part, f"this test does not read {glob!r}"
            parts.append(sep + "[^/]*".join(re.escape(piece) for piece in part.split("*")))
    return "".join(parts)


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
    path = ROOT / dist / "src" / module.replace(".", "/")
    assert path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


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


def test_tests_import_the_stand_ins_and_the_kit_never_another_service(pants: Pants) -> None:
    lab = "loadlab/src/pinecall_loadlab"
    stand_ins = [f"{lab}/livekit/__init__.py", f"{lab}/vendors/state.py", f"{lab}/callers/lines.py"]
    livekit_scenario = f"{lab}/scenarios/livekit_choosing.py"
    runs_services = [f"{lab}/scenarios/chain.py", f"{lab}/commands.py"]
    kit = [
        f"{TEST_KIT}/src/pinecall_testkit/roster.py",
        f"{TEST_KIT}/src/pinecall_testkit/worker.py",
    ]
    cli = _module_of("pinecall_runtime")
    libraries = [d for d, kind in DISTRIBUTIONS.items() if kind == "libs"]
    allowed = [
        *[
            (f"{s}/tests/test_x.py", other)
            for s in SERVICES
            for other in (_module_of(s), *stand_ins, livekit_scenario, *kit)
        ],
        *[(f"{lib}/tests/test_x.py", one) for lib in libraries for one in (*stand_ins, *kit)],
        *[(one, _module_of("libs/servicekit")) for one in stand_ins],
        (stand_ins[0], stand_ins[1]),
        (livekit_scenario, stand_ins[0]),
        *[(_module_of("loadlab"), one) for one in kit],
        *[(kit[0], _module_of(d)) for d in [*SERVICES, *libraries]],
    ]
    denied = [
        *[
            (f"{s}/tests/test_x.py", other)
            for s in SERVICES
            for other in (*[_module_of(o) for o in SERVICES if o != s], *runs_services, cli)
        ],
        *[(_module_of(d), one) for d in [*SERVICES, *libraries] for one in (*stand_ins, *kit)],
        *[(cli, one) for one in (*stand_ins, *kit)],
        *[(one, other) for one in stand_ins for other in (*runs_services, livekit_scenario)],
        *[(one, _module_of(s)) for one in (*stand_ins, livekit_scenario) for s in SERVICES],
        *[(one, kit[0]) for one in stand_ins],
        *[(kit[0], other) for other in (cli, _module_of("loadlab"), stand_ins[0])],
    ]
    assert [pair for pair in allowed if not pants.allows(*pair)] == []
    assert [pair for pair in denied if pants.allows(*pair)] == []


@pytest.mark.parametrize("service", SERVICES)
def test_a_domain_imports_contracts_and_itself_and_nothing_that_does_io(
    pants: Pants, service: str
) -> None:
    (package,) = _packages(service)
    src = f"{service}/src/{package}"
    domain = f"{src}/domain.py"
    allowed = [_module_of("libs/contracts"), f"{src}/__init__.py", THIRD_PARTY]
    denied = [
        *[f"{src}/{module}" for module in ("store.py", "store/tables.py", "api.py", "app.py")],
        *[_module_of(d) for d in DISTRIBUTIONS if d not in ("libs/contracts", service)],
        *[f"reqs#{name}" for name in ("httpx", "nats-py", "sqlalchemy", "psycopg", "litestar")],
    ]
    assert [b for b in allowed if not pants.allows(domain, b)] == []
    assert [b for b in denied if pants.allows(domain, b)] == []
    # the service's other modules may do I/O, and import its domain
    assert pants.allows(f"{src}/store.py", "reqs#sqlalchemy")
    assert pants.allows(f"{src}/store.py", domain)


# -- every import in the repository --------------------------------------------------------------


def _python_files() -> list[Path]:
    """What Pants owns: every distribution's src/ and tests/, and the root tests/."""
    roots = [ROOT / dist / part for dist in DISTRIBUTIONS for part in ("src", "tests")]
    found = {path for root in [*roots, ROOT / "tests"] for path in root.rglob("*.py")}
    return sorted(found)


def _imports_of(path: Path) -> set[str]:
    """Every absolute import of a file (``from x import y`` as ``x`` and ``x.y``, since ``y`` may
    be a module), TYPE_CHECKING and function-level ones included, as Pants infers them."""
    found: set[str] = set()
    for node in ast.walk(_parse(path)):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found |= {node.module, *(f"{node.module}.{alias.name}" for alias in node.names)}
    return found


def _dependency_of(module: str, files: dict[str, str]) -> str | None:
    """The file Pants infers for an import: the first-party module's (the nearest that exists),
    a third-party requirement's address path, or None for the standard library."""
    top = module.split(".")[0]
    if top in sys.stdlib_module_names or top == "__future__":
        return None
    if top not in {m for m in files if "." not in m}:
        return _requirement_path(module)
    parts = module.split(".")
    while ".".join(parts) not in files:
        parts.pop()
    return files[".".join(parts)]


def test_every_import_in_the_repository_is_one_the_pants_rules_allow(pants: Pants) -> None:
    """The rules checked against the code itself, as Pants would check each file's inferred
    dependencies: its imports, and the __init__.py (with content) of each package it is in."""
    files = _module_files()
    refused = []
    for path in _python_files():
        importer = path.relative_to(ROOT).as_posix()
        dependencies = {_dependency_of(module, files) for module in _imports_of(path)}
        dependencies |= {
            init.relative_to(ROOT).as_posix()
            for init in (
                parent / "__init__.py" for parent in path.parents if ROOT in parent.parents
            )
            if init.is_file() and init.read_text().strip() and init != path
        }
        refused += [
            (importer, dependency)
            for dependency in sorted(d for d in dependencies if d and d != importer)
            if not pants.allows(importer, dependency)
        ]
    assert refused == []


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
    ("importlinter:contract:servicekit-imports-only-contracts", "forbidden_modules"),
    ("importlinter:contract:libraries-import-only-libraries", "forbidden_modules"),
    ("importlinter:contract:services-import-only-libraries", "source_modules"),
    ("importlinter:contract:cli-imports-only-libraries", "forbidden_modules"),
    ("importlinter:contract:stand-ins-import-no-service", "forbidden_modules"),
]
DOMAIN_CONTRACT = "importlinter:contract:domain-is-pure"


def test_the_services_contract_is_an_independence_contract() -> None:
    assert _importlinter()["importlinter:contract:services-independent"]["type"] == "independence"


@pytest.mark.parametrize(("section", "key"), SERVICE_LISTS, ids=[s for s, _ in SERVICE_LISTS])
def test_every_service_package_is_in_the_contracts_that_list_services(
    section: str, key: str
) -> None:
    services = {package for service in SERVICES for package in _packages(service)}
    assert services, "no service package found"
    assert services <= _modules(_importlinter(), section, key)


def test_every_service_domain_is_held_pure_and_every_service_is_forbidden_to_it() -> None:
    config = _importlinter()
    domains = {
        f"{package}.domain"
        for service in SERVICES
        for package in _packages(service)
        if (ROOT / service / "src" / package / "domain.py").is_file()
        or (ROOT / service / "src" / package / "domain").is_dir()
    }
    assert domains, "no service has a domain"
    assert _modules(config, DOMAIN_CONTRACT, "source_modules") == domains
    services = {package for service in SERVICES for package in _packages(service)}
    assert {f"{package}.*" for package in services} <= _modules(
        config, DOMAIN_CONTRACT, "forbidden_modules"
    )


# -- the two evaluators agree --------------------------------------------------------------------

# The third-party packages both sets of rules name (the domain's I/O ones), and msgspec, which
# any module may import; by import name, with the requirement Pants knows each by where the two
# differ (the root BUILD's module_mapping).
EXTERNALS = ("httpx", "nats", "sqlalchemy", "psycopg", "aiohttp", "litestar", "granian", "alembic")
REQUIREMENT_OF = {"nats": "nats-py"}


def _requirement_path(module: str) -> str:
    """The path Pants gives a third-party requirement's target (``//:reqs#<name>``)."""
    top = module.split(".")[0]
    return f"reqs#{REQUIREMENT_OF.get(top, top)}"


def _module_files() -> dict[str, str]:
    """Every first-party module (migrations aside) and its file: a package is its __init__.py."""
    files = {}
    for dist in DISTRIBUTIONS:
        src = ROOT / dist / "src"
        for path in sorted(src.rglob("*.py")):
            parts = list(path.relative_to(src).with_suffix("").parts)
            if "migrations" in parts:
                continue
            if parts[-1] == "__init__":
                parts.pop()
            files[".".join(parts)] = path.relative_to(ROOT).as_posix()
    return files


def _importlinter_refusals(
    importers: list[str], imported: list[str], modules: list[str]
) -> set[tuple[str, str]]:
    """The pairs ``(a, b)`` for which lint-imports, with .importlinter's contracts, refuses an
    import of ``b`` in ``a``: its own contract classes, each checked on a graph holding that one
    import. ``modules`` are the workspace's: the graphs hold them, or (for the pair-by-pair
    checks, which are many) the packages, every module a contract names and the pair's own with
    their ancestors, which is all a contract reads of a one-import graph.

    First each importer's imports all at once: a contract kept there is kept for each of them
    (these contracts forbid paths, and one import fewer makes none), which spares most checks.
    """
    import grimp
    from importlinter import api
    from importlinter.contracts.forbidden import ForbiddenContract
    from importlinter.contracts.independence import IndependenceContract

    kinds = {"forbidden": ForbiddenContract, "independence": IndependenceContract}
    config = api.read_configuration(str(ROOT / ".importlinter"))
    session = config["session_options"]
    assert session.get("include_external_packages") in ("True", "true", True)
    contracts = []
    named = set(session["root_packages"])
    for options in config["contracts_options"]:
        assert options["type"] in kinds, f"this test reads {sorted(kinds)} contracts only"
        assert not options.get("ignore_imports"), "an ignored import would need reading here"
        contracts.append(
            kinds[options["type"]](
                name=options["name"], session_options=session, contract_options=options
            )
        )
        for key in ("source_modules", "forbidden_modules", "modules"):
            named |= {m for m in options.get(key, []) if "*" not in m and m not in EXTERNALS}

    def graph(internal: set[str], imports: list[tuple[str, str]]) -> grimp.ImportGraph:
        made = grimp.ImportGraph()
        for module in internal:
            made.add_module(module)
        for module in EXTERNALS:
            made.add_module(module, is_squashed=True)
        for a, b in imports:
            made.add_import(importer=a, imported=b, line_number=1, line_contents=f"import {b}")
        return made

    def lineage(module: str) -> set[str]:
        parts = module.split(".")
        return {".".join(parts[:i]) for i in range(1, len(parts) + 1)} - set(EXTERNALS)

    refused = set()
    for a in importers:
        targets = [b for b in imported if b != a]
        everything = graph(set(modules), [(a, b) for b in targets])
        for contract in contracts:
            if contract.check(everything, verbose=False).kept:
                continue
            for b in targets:
                one = graph(named | lineage(a) | lineage(b), [(a, b)])
                if not contract.check(one, verbose=False).kept:
                    refused.add((a, b))
    return refused


def test_lint_imports_and_the_pants_rules_give_one_answer_for_every_pair(pants: Pants) -> None:
    """Both evaluators over the same pairs of modules, each pair one import: every package, each
    service's domain and another of its modules, the lab's modules that lint-imports names (its
    first level and its scenarios) and the third-party packages the rules name. A module
    lint-imports does not name is judged as its package by both, so these are all the cases."""
    files = _module_files()
    packages = [m for m in files if "." not in m]
    services = [p for s in SERVICES for p in _packages(s)]
    service_modules = [m for m in files if m.split(".")[0] in services and m.count(".") == 1]
    lab = [
        m
        for m in files
        if m.startswith("pinecall_loadlab.")
        and (m.count(".") == 1 or m.startswith("pinecall_loadlab.scenarios."))
    ]
    named = {
        module.removesuffix(".*")
        for options in _importlinter_contracts()
        for key in ("source_modules", "forbidden_modules", "modules")
        for module in options.get(key, [])
    }
    assert named <= {*packages, *service_modules, *lab, *EXTERNALS}, "a module this test skips"
    domains = [m for m in service_modules if m.endswith(".domain")]
    others = [
        next(m for m in service_modules if m.startswith(f"{p}.") and m not in domains)
        for p in services
    ]
    importers = sorted({*packages, *domains, *others, *lab})
    imported = sorted({*packages, *service_modules, *lab, *EXTERNALS})
    refused_by_lint_imports = _importlinter_refusals(importers, imported, list(files))

    def path(module: str) -> str:
        return files[module] if module in files else _requirement_path(module)

    disagreements = [
        (a, b, "lint-imports refuses" if (a, b) in refused_by_lint_imports else "Pants refuses")
        for a in importers
        for b in imported
        if a != b and ((a, b) in refused_by_lint_imports) == pants.allows(path(a), path(b))
    ]
    assert disagreements == []
    # and the rules say something: a good share of these pairs is refused
    assert len(refused_by_lint_imports) > len(importers) * 10


def _importlinter_contracts() -> list[dict[str, Any]]:
    from importlinter import api

    contracts: list[dict[str, Any]] = api.read_configuration(str(ROOT / ".importlinter"))[
        "contracts_options"
    ]
    return contracts
