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

A Pants image agrees with the service's ``deploy/images/<name>.Dockerfile`` (tests/deploy checks
it): the same base, the same non-root user, the same port, an entry point that is the service's
command group (the PEX here, ``pinecall-runtime <group>`` there) and the same default command, so
the chart's ``args`` (``serve``, ``start``, ``migrate``) mean one thing in both.

Visibility rules (shared/CONVENTIONS.md habit 10; ``.importlinter`` says the same for
``lint-imports``): a service may import ``libs/`` and itself, nothing else, and only loadlab and the
cross-service tests may import a service; ``libs/contracts`` imports nothing first-party;
``libs/servicekit`` imports only contracts; the CLI imports libs only (it finds services by entry
points); loadlab may import libs and services, and no production code imports loadlab.

Every dependencies rule set ends by denying each first-party tree it was not given and then
allowing the rest, which is third-party requirements and Pants' own synthetic targets (lockfiles):
the rules name what is first-party instead of guessing the addresses Pants gives the others.
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
}
SERVICE_IMPORTS = ("//libs/**",)
TOOL_IMPORTS = {
    "pinecall_runtime": ("//libs/**",),
    "loadlab": ("//libs/**", "//services/**"),
}

# Who may import a service: itself, the load lab and the cross-service tests. Not another service,
# not a library, not the CLI.
SERVICE_DEPENDENTS = ("/**", "//loadlab/**", "//tests/**", "!*")
# Who may import a tool (the CLI, loadlab): itself and the cross-service tests; loadlab is never
# imported by production code, and nothing imports the CLI.
TOOL_DEPENDENTS = ("/**", "//tests/**", "!*")


def _dependencies_rules(allowed):
    """One rule set for every target here: itself, ``allowed``, no other first-party tree."""
    __dependencies_rules__(
        (
            "*",
            "/**",
            *allowed,
            *["!" + tree for tree in FIRST_PARTY_TREES],
            "*",
        ),
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
    _dependencies_rules(SERVICE_IMPORTS)
    __dependents_rules__(("*", *SERVICE_DEPENDENTS))


# The test kit (tests/kit, pinecall_testkit): it starts services whole, so it may import libraries
# and services; only tests (and the load lab's fixtures) may import it, so no image carries it.
TEST_KIT_IMPORTS = ("//libs/**", "//services/**")
TEST_KIT_DEPENDENTS = ("/**", "//services/**", "//libs/**", "//loadlab/**", "//tests/**", "!*")


def pinecall_test_kit(name):
    """The services' test support under ``tests/<name>``: sources and visibility, no PEX."""
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
    _dependencies_rules(TOOL_IMPORTS[name])
    __dependents_rules__(("*", *TOOL_DEPENDENTS))
