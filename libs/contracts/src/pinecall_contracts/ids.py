"""Identifiers of the field's nouns, and the one grammar of a worker's name.

A worker's name is its LiveKit agent name, ``<fleet>/<worker>.<start>`` (seed 000, "The gateway
hears every worker"; ``shared/DESIGN.md``): ``pinecall/worker-scaled-production-5f654f5f59-zwgjp.
1791067258``. The *worker* part is the pod or host name, the *start* its start time in Unix
seconds, so a worker that comes back under the same host name is told apart from the dead
registration LiveKit may still hold. A cordon names the worker without its start
(``pinecall/worker-a``), so it stands across restarts of the same pod. The overflow registers as
``<fleet>/overflow`` (:func:`overflow_name`), a name no worker can have.

Each part allows exactly this, and why:

============  ============================  ================================================
part          characters                    why
============  ============================  ================================================
fleet         ``a-z 0-9 -``, 1-63, first    the plain agent name SIP rules and tokens
              a letter or a digit           dispatch to, a Kubernetes label value and a
                                            DNS label (the Helm release, KEDA's names); no
                                            ``/``, which ends it
worker        ``A-Z a-z 0-9 _ -``, 1-253,   a host name's first label or a pod's name
              first a letter or a digit;    (``PINECALL_WORKER_HOST`` is ``metadata.name``,
              not ``overflow``              up to 253); **no dot**: the name's one dot is the
                                            one before the start, so a name given without
                                            its start (a cordon's) cannot be read as
                                            ``<worker>.<start>``; ``overflow`` would make
                                            the worker's cordon key the overflow's name
start         digits, no leading zero,      Unix seconds; ``int`` and back gives the same
              1-12                          text, so the name round-trips
============  ============================  ================================================

Every character of a name is safe in a LiveKit agent name and becomes a NATS subject token only
through :func:`pinecall_contracts.subjects.escape_token` (``/`` and ``.`` are escaped there). The
same patterns are the contracts' field patterns (``Worker``, ``WorkerRef``, ``Fleet``), so what
decodes here parses and builds back to itself; :func:`parse_worker_name`, :func:`worker_key`,
:func:`build_worker_name` and :func:`overflow_name` are the only parsers and builders of names.
"""

from __future__ import annotations

import re
from typing import Annotated, NewType

import msgspec

from pinecall_contracts.plain import means

FleetName = NewType("FleetName", str)
"""A fleet's name: ``pinecall`` (production) or ``pinecall-sandbox`` by default."""

WorkerName = NewType("WorkerName", str)
"""``<fleet>/<worker>.<start>``: a worker's LiveKit agent name."""

WorkerKey = NewType("WorkerKey", str)
"""``<fleet>/<worker>``: a worker's name without its start; what a cordon names."""

Environment = NewType("Environment", str)
"""``production`` or ``sandbox`` (the seeds' *world*)."""

ENVIRONMENTS: tuple[Environment, ...] = (Environment("production"), Environment("sandbox"))
"""Every environment a key, a fleet, a quota or a call belongs to: one registry."""

CallId = NewType("CallId", str)
RoomName = NewType("RoomName", str)
KeyId = NewType("KeyId", str)

OVERFLOW = "overflow"
"""The overflow's part after ``<fleet>/``: reserved, no worker is named so."""

_FLEET = r"[a-z0-9][a-z0-9-]{0,62}"
_HOST = rf"(?!{OVERFLOW}(?![A-Za-z0-9_-]))[A-Za-z0-9][A-Za-z0-9_-]{{0,252}}"
_START = r"(?:0|[1-9][0-9]{0,11})"

# `$` also matches before a final "\n" in Python; `(?![\s\S])` makes each pattern end at the end
# in Python and in JSON Schema (ECMA) alike.
FLEET_PATTERN = rf"^{_FLEET}$(?![\s\S])"
WORKER_NAME_PATTERN = rf"^{_FLEET}/{_HOST}\.{_START}$(?![\s\S])"
WORKER_KEY_PATTERN = rf"^{_FLEET}/{_HOST}$(?![\s\S])"
WORKER_PART_PATTERN = rf"^{_HOST}(?:\.{_START})?$(?![\s\S])"
"""A worker's name after its ``<fleet>/``: ``<worker>``, or ``<worker>.<start>``."""
ENVIRONMENT_PATTERN = r"^[a-z][a-z0-9-]{0,31}$(?![\s\S])"
AGENT_PATTERN = means(
    r"^[a-z0-9][a-z0-9_.-]{0,127}$(?![\s\S])",
    "an agent's name: 1 to 128 of a-z 0-9 _ . - (first a letter or a digit)",
)
"""An agent's name: 1-128 of a-z 0-9 _ . - (first a letter or digit)."""
ORG_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$(?![\s\S])"
"""An org's id: 1-128 of A-Z a-z 0-9 _ . : - (first a letter or digit), as a call id."""
E164_PATTERN = means(
    r"^\+[1-9][0-9]{6,14}$(?![\s\S])",
    "a phone number in E.164: a + then 7 to 15 digits, no leading 0, like +15550100",
)
"""A phone number as LiveKit SIP and carriers write it (ITU-T E.164 §6): ``+``, a country code
that does not start with 0, 7 to 15 digits in all. The one pattern of every number the runtime
rings or dials: a phone number's, an outbound call's, a call back's ("+12" was once taken and
then refused by the job offer, leaving a call nobody held)."""

WORKER_NAME_RULE = (
    "<fleet>/<worker>.<start>: fleet 1-63 of a-z 0-9 - (first a letter or digit); worker 1-253 "
    "of A-Z a-z 0-9 _ - (first a letter or digit, no dot, not 'overflow'); start the Unix "
    "seconds in digits without a leading zero"
)
"""The grammar in words, for the errors that refuse a name (see the module's table)."""

Fleet = Annotated[str, msgspec.Meta(pattern=FLEET_PATTERN, examples=["pinecall"])]
Worker = Annotated[
    str, msgspec.Meta(pattern=WORKER_NAME_PATTERN, examples=["pinecall/worker-a.1791067258"])
]
WorkerRef = Annotated[str, msgspec.Meta(pattern=WORKER_KEY_PATTERN, examples=["pinecall/worker-a"])]
EnvironmentField = Annotated[str, msgspec.Meta(pattern=ENVIRONMENT_PATTERN, examples=["sandbox"])]
E164 = Annotated[str, msgspec.Meta(pattern=E164_PATTERN, examples=["+15550100"])]

_FLEET_RE = re.compile(_FLEET)
_HOST_RE = re.compile(_HOST)
_START_RE = re.compile(_START)


class WorkerNameError(ValueError):
    """Not ``<fleet>/<worker>.<start>`` (nor ``<fleet>/<worker>`` where that is allowed); the
    message says which part breaks which rule (:data:`WORKER_NAME_RULE`)."""


class ParsedWorker(msgspec.Struct, frozen=True):
    """The three parts of a worker's name."""

    fleet: FleetName
    host: str
    start: int

    @property
    def key(self) -> WorkerKey:
        """``<fleet>/<host>``: the name without its start."""
        return WorkerKey(f"{self.fleet}/{self.host}")

    @property
    def name(self) -> WorkerName:
        return WorkerName(f"{self.fleet}/{self.host}.{self.start}")


def check_fleet(fleet: str) -> FleetName:
    """``fleet`` if it is a fleet's name; :class:`WorkerNameError` saying the rule if not."""
    if not _FLEET_RE.fullmatch(fleet):
        raise WorkerNameError(
            f"fleet {fleet!r} is not 1-63 of a-z 0-9 - starting with a letter or digit"
        )
    return FleetName(fleet)


def check_worker_part(host: str) -> str:
    """``host`` if it can be the worker part of a name; :class:`WorkerNameError` if not."""
    if _HOST_RE.fullmatch(host):
        return host
    if host == OVERFLOW:
        why = f"is the overflow's name (<fleet>/{OVERFLOW}), no worker's"
    elif "." in host:
        why = "holds a '.': the only dot of a worker's name is the one before its start"
    else:
        why = "is not 1-253 of A-Z a-z 0-9 _ - starting with a letter or digit"
    raise WorkerNameError(f"worker part {host!r} {why}")


def _check_start(start: str) -> int:
    if not _START_RE.fullmatch(start):
        raise WorkerNameError(
            f"start {start!r} is not the Unix seconds in 1-12 digits without a leading zero"
        )
    return int(start)


def parse_worker_name(name: str) -> ParsedWorker:
    """Split ``<fleet>/<worker>.<start>``; :class:`WorkerNameError` naming the part and the rule
    it breaks (:data:`WORKER_NAME_RULE`) for anything else."""
    fleet, slash, rest = name.partition("/")
    host, dot, start = rest.rpartition(".")
    try:
        if not slash or not dot:
            raise WorkerNameError("it is not <fleet>/<worker>.<start>")
        parsed = ParsedWorker(
            fleet=check_fleet(fleet), host=check_worker_part(host), start=_check_start(start)
        )
    except WorkerNameError as exc:
        raise WorkerNameError(f"not a worker name {name!r}: {exc} ({WORKER_NAME_RULE})") from None
    return parsed


def build_worker_name(fleet: str, host: str, start: int) -> WorkerName:
    """``<fleet>/<host>.<start>``, refused (:class:`WorkerNameError`) unless it parses back to
    the same three parts."""
    if start < 0:
        raise WorkerNameError(f"start {start} is not the Unix seconds ({WORKER_NAME_RULE})")
    return parse_worker_name(f"{fleet}/{host}.{start}").name


def worker_key(name_or_key: str) -> WorkerKey:
    """The cordon key of a worker given with or without its start.

    ``pinecall/worker-a.1791067258`` and ``pinecall/worker-a`` both give ``pinecall/worker-a``
    (a worker part holds no dot, so a dot is the start's). Raises :class:`WorkerNameError`.
    """
    fleet, slash, rest = name_or_key.partition("/")
    if "." in rest:
        return parse_worker_name(name_or_key).key
    try:
        if not slash:
            raise WorkerNameError("it is not <fleet>/<worker>[.<start>]")
        return WorkerKey(f"{check_fleet(fleet)}/{check_worker_part(rest)}")
    except WorkerNameError as exc:
        raise WorkerNameError(f"not a worker {name_or_key!r}: {exc} ({WORKER_NAME_RULE})") from None


def overflow_name(fleet: str) -> str:
    """``<fleet>/overflow``: the overflow's LiveKit agent name, and the worker its calls name.
    :class:`WorkerNameError` for a fleet that is not one."""
    return f"{check_fleet(fleet)}/{OVERFLOW}"


def is_overflow(name: str) -> bool:
    """Whether ``name`` is an overflow's (``<fleet>/overflow``)."""
    fleet, slash, rest = name.partition("/")
    return bool(slash) and rest == OVERFLOW and _FLEET_RE.fullmatch(fleet) is not None


def fleet_of(name: str) -> FleetName:
    """The fleet of a worker's name, its key or an overflow's name; :class:`WorkerNameError`
    for anything else."""
    if is_overflow(name):
        return FleetName(name.partition("/")[0])
    return FleetName(worker_key(name).partition("/")[0])
