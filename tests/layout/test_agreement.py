"""lint-imports' own contract classes are run over the same pairs of modules as the Pants rules:
the two must give one answer for each."""

from __future__ import annotations

from typing import Any

from .conftest import (
    EXTERNALS,
    ROOT,
    SERVICES,
    Pants,
    module_files,
    packages_of,
    requirement_path,
)


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
        # An ignored import is the contract class's to apply; on a graph of one import, most
        # ignores match nothing, which must not be an alert.
        if options.get("ignore_imports"):
            assert options.get("unmatched_ignore_imports_alerting") == "none", options["id"]
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
    first level and its scenarios; the simulator's modules too as importers, which an ignored
    import names by wildcard) and the third-party packages the rules name. A module lint-imports
    does not name is judged as its package by both, so these are all the cases."""
    files = module_files()
    packages = [m for m in files if "." not in m]
    services = [p for s in SERVICES for p in packages_of(s)]
    service_modules = [m for m in files if m.split(".")[0] in services and m.count(".") == 1]
    lab = [
        m
        for m in files
        if m.startswith("pinecall_loadlab.")
        and (m.count(".") == 1 or m.startswith("pinecall_loadlab.scenarios."))
    ]
    # the simulator's modules import as an ignored import names them (by wildcard); imported,
    # they are the simulator's package to every rule
    simulator = [m for m in files if m.startswith("pinecall_loadlab.simulate.")]
    assert "pinecall_loadlab.simulate.engine" in simulator
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
    importers = sorted({*packages, *domains, *others, *lab, *simulator})
    imported = sorted({*packages, *service_modules, *lab, *EXTERNALS})
    refused_by_lint_imports = _importlinter_refusals(importers, imported, list(files))

    def path(module: str) -> str:
        return files[module] if module in files else requirement_path(module)

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
