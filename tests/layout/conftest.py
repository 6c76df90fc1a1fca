"""What the build layout's tests share: the workspace as found on disk, the BUILD files run
with stand-ins for Pants' symbols (the ``pants`` fixture), and where Pants finds each module.

BUILD files and ``build-support/macros.py`` are Python syntax that Pants evaluates with its own
symbols in scope. Here they are parsed with :mod:`ast`, then run with stand-ins for those symbols
that record every call, so the targets and visibility rules each distribution gets are checked as
data (:class:`Pants`), evaluated the way Pants' visibility backend reads the rules: the nearest
BUILD file's rules, the first rule set whose selector picks the file, its first matching rule
wins, ``!`` denies, a dependency needs both ends to allow it.

The tests, by subject: ``test_macros`` (each distribution's BUILD file calls its macro),
``test_targets`` (the sources, PEX and image each gets), ``test_visibility`` (who may import whom,
pair by pair), ``test_imports`` (every import in the repository against the rules),
``test_importlinter`` (``.importlinter`` lists what is on disk) and ``test_agreement``
(lint-imports and the Pants rules give one answer for every pair).
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
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


def packages_of(dist: str) -> list[str]:
    """The import packages under a distribution's ``src/``."""
    return sorted(init.parent.name for init in (ROOT / dist / "src").glob("*/__init__.py"))


def service_dirs() -> list[str]:
    services = ROOT / "services"
    return sorted(
        child.relative_to(ROOT).as_posix()
        for child in services.iterdir()
        if child.is_dir() and not child.name.startswith((".", "_"))
    )


def build_files() -> list[Path]:
    """Every BUILD file of the repository, hidden directories (.venv, .git) left out."""
    return sorted(
        path
        for path in ROOT.rglob("BUILD")
        if not any(part.startswith(".") for part in path.relative_to(ROOT).parts)
    )


def module_of(dist: str) -> str:
    """A source file of ``dist`` (its first package's ``__init__.py``), as a path Pants matches."""
    packages = packages_of(dist)
    assert packages, f"{dist}/src holds no package"
    return f"{dist}/src/{packages[0]}/__init__.py"


DISTRIBUTIONS = _distributions()
SERVICES = [dist for dist, kind in DISTRIBUTIONS.items() if kind == "services"]
ANOTHER_SERVICE = "services/another/src/pinecall_another/app.py"  # one with no BUILD file yet


# -- ast -----------------------------------------------------------------------------------------


def parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def top_level_calls(tree: ast.Module) -> list[tuple[str, dict[str, Any]]]:
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


@pytest.fixture(scope="package")
def pants() -> Pants:
    """The BUILD files run once for the package's tests, after the macros' prelude."""
    pants = Pants()
    prelude: dict[str, Any] = {name: pants.symbol(name) for name in PANTS_SYMBOLS}
    exec(compile(MACROS.read_text(), str(MACROS), "exec"), prelude)
    public = {name: value for name, value in prelude.items() if not name.startswith("_")}
    for build in build_files():
        relative = build.parent.relative_to(ROOT).as_posix()
        pants.current = "" if relative == "." else relative
        namespace = {**public, **{name: pants.symbol(name) for name in PANTS_SYMBOLS}}
        exec(compile(build.read_text(), str(build), "exec"), namespace)
    return pants


# -- where Pants finds a module --------------------------------------------------------------------

# The third-party packages both sets of rules name (the domain's I/O ones), and msgspec, which
# any module may import; by import name, with the requirement Pants knows each by where the two
# differ (the root BUILD's module_mapping).
EXTERNALS = ("httpx", "nats", "sqlalchemy", "psycopg", "aiohttp", "litestar", "granian", "alembic")
REQUIREMENT_OF = {"nats": "nats-py"}


def requirement_path(module: str) -> str:
    """The path Pants gives a third-party requirement's target (``//:reqs#<name>``)."""
    top = module.split(".")[0]
    return f"reqs#{REQUIREMENT_OF.get(top, top)}"


def module_files() -> dict[str, str]:
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
