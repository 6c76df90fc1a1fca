"""``.importlinter`` lists what is on disk: its root packages are the workspace's, every service
is in each contract that lists services, every service's domain is held pure."""

from __future__ import annotations

import configparser

import pytest

from .conftest import (
    DISTRIBUTIONS,
    EXTERNALS,
    ROOT,
    SERVICES,
    packages_of,
)


def _importlinter() -> configparser.ConfigParser:
    config = configparser.ConfigParser()
    assert config.read(ROOT / ".importlinter"), ".importlinter is missing"
    return config


def _modules(config: configparser.ConfigParser, section: str, key: str) -> set[str]:
    return {line.strip() for line in config[section][key].splitlines() if line.strip()}


def test_importlinter_root_packages_are_the_workspace_packages() -> None:
    found = {package for dist in DISTRIBUTIONS for package in packages_of(dist)}
    assert _modules(_importlinter(), "importlinter", "root_packages") == found


SERVICE_LISTS = [
    ("importlinter:contract:services-independent", "modules"),
    ("importlinter:contract:contracts-import-nothing", "forbidden_modules"),
    ("importlinter:contract:servicekit-imports-only-contracts", "forbidden_modules"),
    ("importlinter:contract:libraries-import-only-libraries", "forbidden_modules"),
    ("importlinter:contract:services-import-only-libraries", "source_modules"),
    ("importlinter:contract:cli-imports-only-libraries", "forbidden_modules"),
    ("importlinter:contract:stand-ins-import-no-service", "forbidden_modules"),
    ("importlinter:contract:simulator-imports-only-domains", "forbidden_modules"),
]
DOMAIN_CONTRACT = "importlinter:contract:domain-is-pure"


def test_the_services_contract_is_an_independence_contract() -> None:
    assert _importlinter()["importlinter:contract:services-independent"]["type"] == "independence"


@pytest.mark.parametrize(("section", "key"), SERVICE_LISTS, ids=[s for s, _ in SERVICE_LISTS])
def test_every_service_package_is_in_the_contracts_that_list_services(
    section: str, key: str
) -> None:
    services = {package for service in SERVICES for package in packages_of(service)}
    assert services, "no service package found"
    assert services <= _modules(_importlinter(), section, key)


def test_every_service_domain_is_held_pure_and_every_service_is_forbidden_to_it() -> None:
    config = _importlinter()
    domains = {
        f"{package}.domain"
        for service in SERVICES
        for package in packages_of(service)
        if (ROOT / service / "src" / package / "domain.py").is_file()
        or (ROOT / service / "src" / package / "domain").is_dir()
    }
    assert domains, "no service has a domain"
    assert _modules(config, DOMAIN_CONTRACT, "source_modules") == domains
    services = {package for service in SERVICES for package in packages_of(service)}
    assert {f"{package}.*" for package in services} <= _modules(
        config, DOMAIN_CONTRACT, "forbidden_modules"
    )


# -- the two evaluators agree --------------------------------------------------------------------


def test_the_simulated_caller_is_forbidden_the_load_lab_and_the_contract_bites() -> None:
    """Issue 18, acceptance 5: ``/v1/evals/voice`` uses no code of the load lab. The contract
    names the caller's package, and lint-imports refuses a graph where it imports the lab's
    callers (and keeps the one where it imports the lab room, a library)."""
    import grimp
    from importlinter import api
    from importlinter.contracts.forbidden import ForbiddenContract

    config = api.read_configuration(str(ROOT / ".importlinter"))
    [options] = [
        o for o in config["contracts_options"] if o["id"] == "simulated-caller-imports-no-lab"
    ]
    assert options["source_modules"] == ["pinecall_dispatcher.evals"]
    assert set(options["forbidden_modules"]) == {"pinecall_loadlab", "pinecall_testkit"}
    contract = ForbiddenContract(
        name=options["name"], session_options=config["session_options"], contract_options=options
    )

    def kept(imported: str) -> bool:
        graph = grimp.ImportGraph()
        for module in (
            "pinecall_dispatcher",
            "pinecall_dispatcher.evals",
            "pinecall_dispatcher.evals.caller",
            "pinecall_loadlab",
            "pinecall_loadlab.callers",
            "pinecall_testkit",
            "pinecall_labroom",
        ):
            graph.add_module(module)
        graph.add_import(
            importer="pinecall_dispatcher.evals.caller",
            imported=imported,
            line_number=1,
            line_contents=f"import {imported}",
        )
        return bool(contract.check(graph, verbose=False).kept)

    assert not kept("pinecall_loadlab.callers")
    assert not kept("pinecall_testkit")
    assert kept("pinecall_labroom")


def test_the_simulator_may_import_of_the_services_only_their_domains_and_the_contract_bites() -> (
    None
):
    """Issue 23, acceptance 1: ``lab simulate`` runs the production rules, imported. Every service
    is forbidden to the simulator whole, its imports of a domain ignored: lint-imports keeps a
    graph where the simulator (its package or a module in it) imports domains, and refuses one
    where it imports a service's other module or package, the lab's scenarios, the test kit or
    an I/O library. The Pants side is tests/layout/test_visibility.py's."""
    import grimp
    from importlinter import api
    from importlinter.contracts.forbidden import ForbiddenContract

    config = api.read_configuration(str(ROOT / ".importlinter"))
    [options] = [
        o for o in config["contracts_options"] if o["id"] == "simulator-imports-only-domains"
    ]
    assert options["source_modules"] == ["pinecall_loadlab.simulate"]
    contract = ForbiddenContract(
        name=options["name"], session_options=config["session_options"], contract_options=options
    )
    simulator = ("pinecall_loadlab.simulate", "pinecall_loadlab.simulate.choosing")
    domains = ("pinecall_dispatcher.domain", "pinecall_roster.domain", "pinecall_worker.domain")

    def kept(importer: str, *imported: str) -> bool:
        graph = grimp.ImportGraph()
        for module in (
            "pinecall_loadlab",
            *simulator,
            "pinecall_loadlab.plots",
            "pinecall_loadlab.scenarios",
            "pinecall_loadlab.scenarios.chain",
            "pinecall_dispatcher.placing",
            "pinecall_contracts",
            *domains,
        ):
            graph.add_module(module)
        for module in options["forbidden_modules"]:
            if module not in graph.modules:
                graph.add_module(module, is_squashed=module in EXTERNALS)
        for module in (*domains, *imported):
            graph.add_import(
                importer=importer,
                imported=module,
                line_number=1,
                line_contents=f"import {module}",
            )
        return bool(contract.check(graph, verbose=False).kept)

    for importer in simulator:
        assert kept(importer, "pinecall_contracts", "pinecall_loadlab.plots")
        for forbidden in (
            "pinecall_dispatcher.placing",
            "pinecall_dispatcher",
            "pinecall_loadlab.scenarios.chain",
            "pinecall_testkit",
            "httpx",
        ):
            assert not kept(importer, forbidden), (importer, forbidden)
