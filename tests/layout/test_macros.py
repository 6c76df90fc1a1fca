"""Every BUILD file is one Pants can read, and each distribution's calls its kind's macro
(``build-support/macros.py``) with the distribution's name."""

from __future__ import annotations

import ast
from pathlib import Path, PurePosixPath

import pytest

from .conftest import (
    DISTRIBUTIONS,
    MACRO_OF_KIND,
    MACROS,
    ROOT,
    build_files,
    parse,
    service_dirs,
    top_level_calls,
)


@pytest.mark.parametrize(
    "path", [*build_files(), MACROS], ids=lambda p: p.relative_to(ROOT).as_posix()
)
def test_build_files_parse_and_import_nothing(path: Path) -> None:
    tree = parse(path)
    imports = [node for node in ast.walk(tree) if isinstance(node, ast.Import | ast.ImportFrom)]
    assert not imports, f"{path.name}: Pants refuses import statements in BUILD files and preludes"


@pytest.mark.parametrize("dist", sorted(DISTRIBUTIONS))
def test_every_distribution_calls_its_macro_with_its_name(dist: str) -> None:
    build = ROOT / dist / "BUILD"
    assert build.is_file(), f"{dist} has no BUILD file"
    macro = MACRO_OF_KIND[DISTRIBUTIONS[dist]]
    calls = [(symbol, kw.get("name")) for symbol, kw in top_level_calls(parse(build))]
    assert calls == [(macro, PurePosixPath(dist).name)]


@pytest.mark.parametrize("service", service_dirs())
def test_every_service_is_declared_with_pinecall_service(service: str) -> None:
    build = ROOT / service / "BUILD"
    assert build.is_file(), f"{service} has no BUILD file"
    symbols = [symbol for symbol, _ in top_level_calls(parse(build))]
    assert symbols == ["pinecall_service"]


def test_macros_define_a_macro_for_each_kind() -> None:
    defined = {node.name for node in parse(MACROS).body if isinstance(node, ast.FunctionDef)}
    assert set(MACRO_OF_KIND.values()) <= defined
