"""Identifiers of the field's nouns, and the rules that parse a worker's name.

A worker's name is its LiveKit agent name, ``<fleet>/<worker>.<start>`` (seed 000, "The gateway
hears every worker"): ``pinecall/worker-scaled-production-5f654f5f59-zwgjp.1791067258``. The
*worker* part is the pod or host name, the *start* its start time in Unix seconds, so a worker
that comes back under the same host name is told apart from the dead registration LiveKit may
still hold. A cordon names the worker without its start (``pinecall/worker-a``), so it stands
across restarts of the same pod.
"""

from __future__ import annotations

import re
from typing import Annotated, NewType

import msgspec

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

# `$` also matches before a final "\n" in Python; `(?![\s\S])` makes each pattern end at the end
# in Python and in JSON Schema (ECMA) alike.
FLEET_PATTERN = r"^[a-z0-9][a-z0-9-]{0,62}$(?![\s\S])"
WORKER_NAME_PATTERN = (
    r"^[a-z0-9][a-z0-9-]{0,62}/[A-Za-z0-9][A-Za-z0-9._-]{0,252}\.[0-9]{1,12}$(?![\s\S])"
)
WORKER_KEY_PATTERN = r"^[a-z0-9][a-z0-9-]{0,62}/[A-Za-z0-9][A-Za-z0-9._-]{0,252}$(?![\s\S])"
ENVIRONMENT_PATTERN = r"^[a-z][a-z0-9-]{0,31}$(?![\s\S])"

Fleet = Annotated[str, msgspec.Meta(pattern=FLEET_PATTERN, examples=["pinecall"])]
Worker = Annotated[
    str, msgspec.Meta(pattern=WORKER_NAME_PATTERN, examples=["pinecall/worker-a.1791067258"])
]
WorkerRef = Annotated[str, msgspec.Meta(pattern=WORKER_KEY_PATTERN, examples=["pinecall/worker-a"])]
EnvironmentField = Annotated[str, msgspec.Meta(pattern=ENVIRONMENT_PATTERN, examples=["sandbox"])]

_WORKER_NAME = re.compile(WORKER_NAME_PATTERN)
_WORKER_KEY = re.compile(WORKER_KEY_PATTERN)


class WorkerNameError(ValueError):
    """Not ``<fleet>/<worker>.<start>`` (nor ``<fleet>/<worker>`` where that is allowed)."""


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


def parse_worker_name(name: str) -> ParsedWorker:
    """Split ``<fleet>/<worker>.<start>``; raises :class:`WorkerNameError` for anything else."""
    if not _WORKER_NAME.match(name):
        raise WorkerNameError(f"not a worker name <fleet>/<worker>.<start>: {name!r}")
    fleet, rest = name.split("/", 1)
    host, start = rest.rsplit(".", 1)
    return ParsedWorker(fleet=FleetName(fleet), host=host, start=int(start))


def worker_key(name_or_key: str) -> WorkerKey:
    """The cordon key of a worker given with or without its start.

    ``pinecall/worker-a.1791067258`` and ``pinecall/worker-a`` both give ``pinecall/worker-a``.
    A trailing ``.<digits>`` is always read as the start. Raises :class:`WorkerNameError`.
    """
    if _WORKER_NAME.match(name_or_key):
        return parse_worker_name(name_or_key).key
    if _WORKER_KEY.match(name_or_key):
        return WorkerKey(name_or_key)
    raise WorkerNameError(f"not a worker <fleet>/<worker>[.<start>]: {name_or_key!r}")
