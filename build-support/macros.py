# ruff: noqa: F821
# (Pants supplies python_sources, pex_binary, docker_image, __dependencies_rules__ and the other
# BUILD symbols when it evaluates this prelude; they are not defined in this file.)
"""Pants prelude macros: one call in a distribution's BUILD file stamps all of its targets.

``pants.toml`` loads this file through ``build_file_prelude_globs``. A prelude is Python syntax
evaluated with the BUILD symbols in scope and may not import anything.

* ``pinecall_library(name=...)`` for ``libs/<name>``: sources, tests, visibility.
* ``pinecall_service(name=..., entry=...)`` for ``services/<name>``: the same, plus one PEX of the
  service's click group and one image holding that PEX (pantsbuild/example-docker: one PEX per
  image, the image depending on the PEX).
* ``pinecall_tool(name=..., entry=...)`` for ``pinecall_runtime`` (the CLI) and ``loadlab``: the
  same as a library, plus a PEX; the load lab's also gets an image (its stand-ins, ``command=``).
* ``pinecall_test_kit(name=...)`` for ``tests/kit``, the services' test support: sources and
  visibility only.

A Pants image agrees with the service's ``deploy/images/<name>.Dockerfile`` (tests/deploy checks
it): the same base, the same non-root user, the same port, an entry point that is the service's
command group (the PEX here, ``pinecall-runtime <group>`` there) and the same default command, so
the chart's ``args`` (``serve``, ``start``, ``migrate``) mean one thing in both.

Visibility rules (shared/CONVENTIONS.md habit 10). ``.importlinter`` says the same for
``lint-imports``, and tests/layout/test_agreement.py runs both over the same pairs of modules and
holds them to one answer. Who may import whom:

====================  ===========================================================================
importer              may import (besides the third-party requirements)
====================  ===========================================================================
libs/contracts        nothing first-party
libs/servicekit       contracts
libs/sdk              contracts (the tenant's SDK, ``pinecall``: never servicekit or the clients)
any other library     the libraries
a service             the libraries and itself; never another service, the CLI, the load lab
a service's domain    contracts and itself: no I/O, so none of its service's other modules (store,
                      api, app, ...), no other library, and none of the I/O requirements (httpx,
                      nats-py, sqlalchemy, psycopg, aiohttp, litestar, granian, alembic)
the CLI               the libraries (it finds services by entry points)
loadlab               the libraries, the services and the test kit
the lab's stand-ins   the libraries and the stand-ins (so they reach no service): LiveKit, the
                      vendors and the callers faked on their own wire, and the LiveKit-only
                      scenario (``scenarios/livekit_choosing.py``)
the simulator         the libraries, the services' domains and, of the lab, itself, LiveKit's
                      stand-in and the plots' style (``lab simulate``: the production rules,
                      imported); no other module of a service and none of the I/O requirements
the test kit          the libraries and the services (tests/kit, pinecall_testkit: it starts a
                      service whole, for tests)
a distribution's      what its sources may, and the lab's stand-ins and the test kit. Not another
tests/                service: a test that needs one reaches it through the kit (started whole,
                      spoken to over HTTP or NATS); a test built on several services (the
                      dispatcher in its chain) is cross-service and lives in the root tests/
tests/ (the root)     everything
====================  ===========================================================================

Each rule is written at both ends, as Pants checks them: a dependency needs the importer's
``__dependencies_rules__`` and the imported's ``__dependents_rules__`` to allow it. A service is
imported only by itself, loadlab and tests/ (the kit is under tests/); the CLI only by itself and
tests/; loadlab only by itself and tests/, and its stand-ins also by a distribution's tests; the
kit only by tests and loadlab (the lab's pytest fixtures make keys with it).

Every dependencies rule set ends by denying each first-party tree it was not given and then
allowing the rest, which is third-party requirements and Pants' own synthetic targets (lockfiles):
the rules name what is first-party instead of guessing the addresses Pants gives the others.
A rule set's selector picks the files it is for (the first that matches a file is the file's):
``{"path": "/tests/**"}`` a distribution's tests, ``{"path": "/src/*/domain.py"}`` a domain.
"""

# Every first-party tree. A dependency on one of these is allowed only if a rule allows it first.
FIRST_PARTY_TREES = (
    "//libs/**",
    "//services/**",
    "//pinecall_runtime/**",
    "//loadlab/**",
    "//tests/**",
)

# What each library may import besides itself; a library not listed may import any library.
LIBRARY_IMPORTS = {
    "contracts": (),
    "servicekit": ("//libs/contracts/**",),
    # the tenant's SDK (distribution `pinecall`): a tenant installs it with the contracts alone
    "sdk": ("//libs/contracts/**",),
}
SERVICE_IMPORTS = ("//libs/**",)
TOOL_IMPORTS = {
    "pinecall_runtime": ("//libs/**",),
    "loadlab": ("//libs/**", "//services/**", "//tests/kit/**"),
}

# A service's domain: pure rules of plain values (habit 5). It may import contracts and itself
# (and its package's __init__.py, which Pants counts as a dependency of every module in it).
DOMAIN = ({"path": "/src/*/domain.py"}, {"path": "/src/*/domain/**"})
DOMAIN_IMPORTS = (
    "//libs/contracts/**",
    "/src/*/__init__.py",
    "/src/*/domain.py",
    "/src/*/domain/**",
)
# The third-party requirements that do I/O, by the address Pants gives them (//:reqs#<name>).
IO_REQUIREMENTS = (
    "//reqs#httpx",
    "//reqs#nats-py",
    "//reqs#sqlalchemy",
    "//reqs#psycopg",
    "//reqs#aiohttp",
    "//reqs#litestar",
    "//reqs#granian",
    "//reqs#alembic",
)

# The load lab's stand-ins, which a distribution's tests may import: they import no service.
_LAB = "//loadlab/src/pinecall_loadlab"
LAB_STAND_INS = (
    _LAB + "/livekit/**",
    _LAB + "/vendors/**",
    _LAB + "/whatsapp/**",
    _LAB + "/callers/**",
)
# LiveKit choosing the worker on the stand-in alone: a scenario, and no runtime service in it.
LAB_LIVEKIT_SCENARIO = _LAB + "/scenarios/livekit_choosing.py"
# What the stand-ins may import of the lab: each other and the packages they sit in.
LAB_STAND_IN_IMPORTS = (
    *LAB_STAND_INS,
    _LAB + "/__init__.py",
    _LAB + "/scenarios/__init__.py",
    _LAB + "/serving.py",  # stopping their servers with no socket left open
)
# The simulator (`lab simulate`, issue 23): a day through the production rules, imported and
# never re-written, so of the services it may import their domains alone.
LAB_SIMULATOR = {"path": _LAB + "/simulate/**"}
LAB_SIMULATOR_IMPORTS = (
    _LAB + "/__init__.py",
    _LAB + "/simulate/**",
    _LAB + "/livekit/**",
    _LAB + "/serving.py",
    _LAB + "/plots.py",
    "//libs/**",
    "//services/*/src/*/domain.py",
    "//services/*/src/*/domain/**",
)
TEST_KIT = ("//tests/kit/**",)
# A distribution's tests, by path; the root tests/ is "//tests/**".
DISTRIBUTION_TESTS = (
    "//libs/*/tests/**",
    "//services/*/tests/**",
    "//pinecall_runtime/tests/**",
    "//loadlab/tests/**",
)
TESTS = {"path": "/tests/**"}

# Who may import a service: itself, the load lab and tests/ (the cross-service tests, the kit).
# Not another service, not a library, not the CLI, not another distribution's tests.
SERVICE_DEPENDENTS = ("/**", "//loadlab/**", "//tests/**", "!*")
# Who may import a tool (the CLI, loadlab): itself and the cross-service tests; loadlab is never
# imported by production code, and nothing imports the CLI.
TOOL_DEPENDENTS = ("/**", "//tests/**", "!*")
# Who may import the lab's stand-ins: the same, and any distribution's tests.
STAND_IN_DEPENDENTS = ("/**", "//tests/**", *DISTRIBUTION_TESTS, "!*")
# Who may import the test kit: tests, and the load lab (its pytest fixtures).
TEST_KIT_IMPORTS = ("//libs/**", "//services/**")
TEST_KIT_DEPENDENTS = ("/**", "//tests/**", *DISTRIBUTION_TESTS, "//loadlab/**", "!*")


def _deny_the_rest():
    """Every first-party tree not allowed before, denied; then anything else (third party)."""
    return (*["!" + tree for tree in FIRST_PARTY_TREES], "*")


def _dependencies_rules(allowed, *first):
    """Rule sets for every target here: ``first`` (rule sets for some of its files, such as a
    service's domain), then its tests (``allowed``, the lab's stand-ins, the test kit), then the
    rest (itself and ``allowed``); no other first-party tree."""
    __dependencies_rules__(
        *first,
        (
            TESTS,
            "/**",
            *allowed,
            *LAB_STAND_INS,
            LAB_LIVEKIT_SCENARIO,
            *TEST_KIT,
            *_deny_the_rest(),
        ),
        ("*", "/**", *allowed, *_deny_the_rest()),
    )


def _python_targets(data, test_data):
    """Sources under ``src/``, tests under ``tests/``, and the files each reads at run time."""
    python_sources(name="src", sources=["src/**/*.py"], dependencies=[":data"] if data else [])
    python_test_utils(name="test_utils", sources=["tests/**/conftest.py"])
    python_tests(
        name="tests",
        sources=["tests/**/test_*.py"],
        dependencies=[":test_data"] if test_data else [],
    )
    if data:
        resources(name="data", sources=list(data))
    if test_data:
        resources(name="test_data", sources=list(test_data))


def _pex(name, entry):
    """One PEX of ``entry``, ``dist/pinecall-<name>.pex``.

    It names ``:src`` whole: services hand modules to Granian and alembic as strings, which
    dependency inference cannot see.
    """
    pex_binary(
        name="pex",
        entry_point=entry,
        dependencies=[":src"],
        output_path=_pex_file(name),
        # A venv-mode PEX unpacks once into a virtual environment and then starts like one.
        execution_mode="venv",
    )


def _pex_file(name):
    slug = name.replace("_", "-")
    return (slug if slug.startswith("pinecall-") else "pinecall-" + slug) + ".pex"


def pinecall_library(name, data=(), test_data=()):
    """A library under ``libs/<name>``."""
    _python_targets(data, test_data)
    _dependencies_rules(LIBRARY_IMPORTS.get(name, ("//libs/**",)))


# The images' common ground with deploy/images/*.Dockerfile.
IMAGE_BASE = "python:3.11-slim-bookworm"
IMAGE_USER = "10001:10001"


def _image(name, command, port):
    """One image of the PEX of ``name``: non-root, the PEX as entry point, ``command`` by default.

    The PEX unpacks into ``PEX_ROOT`` at its first start: /tmp, which the chart mounts writable
    under a read-only root.
    """
    docker_image(
        name="image",
        repository=_pex_file(name)[: -len(".pex")],
        dependencies=[":pex"],
        instructions=[
            "FROM " + IMAGE_BASE,
            "RUN useradd --uid 10001 --user-group --no-log-init --no-create-home"
            " --shell /usr/sbin/nologin pinecall",
            "COPY " + _pex_file(name) + " /bin/service",
            "ENV PEX_ROOT=/tmp/pex PYTHONUNBUFFERED=1 PINECALL_HOST=0.0.0.0",
            "USER " + IMAGE_USER,
            *(["EXPOSE " + str(port)] if port else []),
            'ENTRYPOINT ["/bin/service"]',
            "CMD [" + ", ".join('"' + word + '"' for word in command) + "]",
        ],
    )


def pinecall_service(name, entry, port=None, command=("serve",), data=(), test_data=()):
    """A service under ``services/<name>``: its targets, its PEX, its image, its visibility.

    ``entry`` is the service's click group (``pinecall_<name>.main:cli``); the image runs
    ``command`` by default (``serve``; a worker's is ``start``), and ``migrate`` as the Helm
    pre-upgrade hook's. ``port`` is what it listens on: ``PINECALL_PORT``'s default, or a
    worker's health port (tests/deploy holds it to the Dockerfile's ``EXPOSE``).
    """
    _python_targets(data, test_data)
    _pex(name, entry)
    _image(name, command, port)
    _dependencies_rules(
        SERVICE_IMPORTS,
        (DOMAIN, *DOMAIN_IMPORTS, *["!" + r for r in IO_REQUIREMENTS], *_deny_the_rest()),
    )
    __dependents_rules__(("*", *SERVICE_DEPENDENTS))


def pinecall_test_kit(name):
    """The services' test support under ``tests/<name>`` (pinecall_testkit): sources and
    visibility, no PEX and no image. It starts services whole, so it may import them; only tests
    and the load lab may import it, and no image installs it."""
    _python_targets((), ())
    _dependencies_rules(TEST_KIT_IMPORTS)
    __dependents_rules__(("*", *TEST_KIT_DEPENDENTS))


def pinecall_tool(name, entry, data=(), test_data=(), command=None, port=None):
    """The CLI (``pinecall_runtime``) or the load lab (``loadlab``): sources, tests and a PEX.

    With ``command`` (and ``port``), an image of the PEX too: the load lab's stand-ins.
    """
    if name not in TOOL_IMPORTS:
        raise ValueError(f"pinecall_tool: unknown tool {name!r}; expected one of {TOOL_IMPORTS}")
    _python_targets(data, test_data)
    _pex(name, entry)
    if command is not None:
        _image(name, command, port)
    if name == "loadlab":
        stand_ins = tuple({"path": glob} for glob in (*LAB_STAND_INS, LAB_LIVEKIT_SCENARIO))
        _dependencies_rules(
            TOOL_IMPORTS[name],
            (stand_ins, "//libs/**", *LAB_STAND_IN_IMPORTS, *_deny_the_rest()),
            (
                LAB_SIMULATOR,
                *LAB_SIMULATOR_IMPORTS,
                *["!" + r for r in IO_REQUIREMENTS],
                *_deny_the_rest(),
            ),
        )
        __dependents_rules__((stand_ins, *STAND_IN_DEPENDENTS), ("*", *TOOL_DEPENDENTS))
    else:
        _dependencies_rules(TOOL_IMPORTS[name])
        __dependents_rules__(("*", *TOOL_DEPENDENTS))
