"""Every import in the repository is one the Pants rules allow, as Pants infers a file's
dependencies."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from .conftest import (
    DISTRIBUTIONS,
    ROOT,
    Pants,
    module_files,
    parse,
    requirement_path,
)


def _python_files() -> list[Path]:
    """What Pants owns: every distribution's src/ and tests/, and the root tests/."""
    roots = [ROOT / dist / part for dist in DISTRIBUTIONS for part in ("src", "tests")]
    found = {path for root in [*roots, ROOT / "tests"] for path in root.rglob("*.py")}
    return sorted(found)


def _imports_of(path: Path) -> set[str]:
    """Every absolute import of a file, TYPE_CHECKING and function-level ones included, as Pants
    infers them: ``from x import y`` is ``x.y`` alone, which is ``x`` when ``y`` is no module
    (:func:`_dependency_of` takes the nearest that exists), and ``from x import *`` is ``x``
    (pantsbuild/pants, src/rust/engine/dep_inference/src/python/tests.rs, ``simple_imports``).
    So ``from pinecall_roster import domain`` depends on the domain, not the package's
    ``__init__.py``."""
    found: set[str] = set()
    for node in ast.walk(parse(path)):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def _dependency_of(module: str, files: dict[str, str]) -> str | None:
    """The file Pants infers for an import: the first-party module's (the nearest that exists),
    a third-party requirement's address path, or None for the standard library."""
    top = module.split(".")[0]
    if top in sys.stdlib_module_names or top == "__future__":
        return None
    if top not in {m for m in files if "." not in m}:
        return requirement_path(module)
    parts = module.split(".")
    while ".".join(parts) not in files:
        parts.pop()
    return files[".".join(parts)]


def test_every_import_in_the_repository_is_one_the_pants_rules_allow(pants: Pants) -> None:
    """The rules checked against the code itself, as Pants would check each file's inferred
    dependencies: its imports, and the __init__.py (with content) of each package it is in."""
    files = module_files()
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
