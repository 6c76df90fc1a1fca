"""Who may import whom, as the Pants visibility rules say, pair by pair: services never each
other, production never the load lab, the dependency direction, tests only the stand-ins and the
kit, a domain nothing that does I/O, the simulator of the services only their domains."""

from __future__ import annotations

import pytest

from .conftest import (
    ANOTHER_SERVICE,
    DISTRIBUTIONS,
    SERVICES,
    TEST_KIT,
    THIRD_PARTY,
    Pants,
    module_of,
    packages_of,
)


@pytest.mark.parametrize("service", SERVICES)
def test_services_are_not_importable_from_each_other(pants: Pants, service: str) -> None:
    mine = module_of(service)
    others = [module_of(other) for other in SERVICES if other != service] + [ANOTHER_SERVICE]
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
    lab, production = module_of("loadlab"), module_of(dist)
    assert not pants.verdict("__dependents_rules__", owner=lab, other=production)
    assert not pants.verdict("__dependencies_rules__", owner=production, other=lab)
    assert not pants.allows(production, lab)


def test_the_dependency_direction(pants: Pants) -> None:
    contracts = module_of("libs/contracts")
    servicekit = module_of("libs/servicekit")
    cli = module_of("pinecall_runtime")
    lab = module_of("loadlab")
    e2e = "tests/test_e2e.py"
    allowed = [
        (contracts, THIRD_PARTY),
        (servicekit, contracts),
        (cli, contracts),
        (cli, servicekit),
        (lab, contracts),
        (lab, servicekit),
        *[(module_of(s), lib) for s in SERVICES for lib in (contracts, servicekit)],
        *[(module_of(s), THIRD_PARTY) for s in SERVICES],
        *[(f"{s}/tests/test_x.py", module_of(s)) for s in SERVICES],
        *[(lab, module_of(s)) for s in SERVICES],
        *[(e2e, module_of(d)) for d in DISTRIBUTIONS],
    ]
    denied = [
        (contracts, servicekit),
        (contracts, cli),
        (servicekit, cli),
        (cli, lab),
        *[(contracts, module_of(s)) for s in SERVICES],
        *[(servicekit, module_of(s)) for s in SERVICES],
        *[(cli, module_of(s)) for s in SERVICES],
        *[(module_of(s), cli) for s in SERVICES],
        *[(module_of(s), e2e) for s in SERVICES],
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
    cli = module_of("pinecall_runtime")
    libraries = [d for d, kind in DISTRIBUTIONS.items() if kind == "libs"]
    allowed = [
        *[
            (f"{s}/tests/test_x.py", other)
            for s in SERVICES
            for other in (module_of(s), *stand_ins, livekit_scenario, *kit)
        ],
        *[(f"{lib}/tests/test_x.py", one) for lib in libraries for one in (*stand_ins, *kit)],
        *[(one, module_of("libs/servicekit")) for one in stand_ins],
        (stand_ins[0], stand_ins[1]),
        (livekit_scenario, stand_ins[0]),
        *[(module_of("loadlab"), one) for one in kit],
        *[(kit[0], module_of(d)) for d in [*SERVICES, *libraries]],
    ]
    denied = [
        *[
            (f"{s}/tests/test_x.py", other)
            for s in SERVICES
            for other in (*[module_of(o) for o in SERVICES if o != s], *runs_services, cli)
        ],
        *[(module_of(d), one) for d in [*SERVICES, *libraries] for one in (*stand_ins, *kit)],
        *[(cli, one) for one in (*stand_ins, *kit)],
        *[(one, other) for one in stand_ins for other in (*runs_services, livekit_scenario)],
        *[(one, module_of(s)) for one in (*stand_ins, livekit_scenario) for s in SERVICES],
        *[(one, kit[0]) for one in stand_ins],
        *[(kit[0], other) for other in (cli, module_of("loadlab"), stand_ins[0])],
    ]
    assert [pair for pair in allowed if not pants.allows(*pair)] == []
    assert [pair for pair in denied if pants.allows(*pair)] == []


def test_the_simulator_imports_of_the_services_only_their_domains(pants: Pants) -> None:
    """Issue 23, acceptance 1: ``lab simulate`` imports the production rules, so of a service it
    may import the domain and nothing else; of the lab itself, LiveKit's stand-in and the plots'
    style; no I/O requirement. The lint-imports side is tests/layout/test_importlinter.py's."""
    lab = "loadlab/src/pinecall_loadlab"
    simulator = [f"{lab}/simulate/__init__.py", f"{lab}/simulate/choosing.py"]
    allowed = [
        *[f"{s}/src/{packages_of(s)[0]}/domain.py" for s in SERVICES],
        f"{SERVICES[0]}/src/{packages_of(SERVICES[0])[0]}/domain/rules.py",
        f"{lab}/__init__.py",
        f"{lab}/simulate/engine.py",
        f"{lab}/livekit/policy.py",
        f"{lab}/plots.py",
        module_of("libs/contracts"),
        module_of("libs/servicekit"),
        THIRD_PARTY,
    ]
    denied = [
        *[module_of(s) for s in SERVICES],
        *[f"{s}/src/{packages_of(s)[0]}/{m}" for s in SERVICES for m in ("store.py", "app.py")],
        f"{lab}/scenarios/chain.py",
        f"{lab}/callers/lines.py",
        f"{lab}/commands.py",
        f"{TEST_KIT}/src/pinecall_testkit/roster.py",
        module_of("pinecall_runtime"),
        *[f"reqs#{name}" for name in ("httpx", "nats-py", "sqlalchemy", "psycopg", "litestar")],
    ]
    assert [(a, b) for a in simulator for b in allowed if not pants.allows(a, b)] == []
    assert [(a, b) for a in simulator for b in denied if pants.allows(a, b)] == []


@pytest.mark.parametrize("service", SERVICES)
def test_a_domain_imports_contracts_and_itself_and_nothing_that_does_io(
    pants: Pants, service: str
) -> None:
    (package,) = packages_of(service)
    src = f"{service}/src/{package}"
    domain = f"{src}/domain.py"
    allowed = [module_of("libs/contracts"), f"{src}/__init__.py", THIRD_PARTY]
    denied = [
        *[f"{src}/{module}" for module in ("store.py", "store/tables.py", "api.py", "app.py")],
        *[module_of(d) for d in DISTRIBUTIONS if d not in ("libs/contracts", service)],
        *[f"reqs#{name}" for name in ("httpx", "nats-py", "sqlalchemy", "psycopg", "litestar")],
    ]
    assert [b for b in allowed if not pants.allows(domain, b)] == []
    assert [b for b in denied if pants.allows(domain, b)] == []
    # the service's other modules may do I/O, and import its domain
    assert pants.allows(f"{src}/store.py", "reqs#sqlalchemy")
    assert pants.allows(f"{src}/store.py", domain)
