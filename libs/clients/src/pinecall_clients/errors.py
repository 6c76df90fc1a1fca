"""The clients' errors: one small tree per service, so a caller never catches an httpx,
stamina, NATS, aiohttp or livekit-api type.

::

    CallLogError                      status
    ├── CallLogUnavailable            None or 5xx   nothing answered, or a 5xx, until the
    │                                               retry's time ran out (the request may be
    │                                               sent again unchanged)
    └── CallLogRefused                4xx           the service's answer (a problem detail)
        ├── CallUnknown               404           the log does not hold the call
        ├── AgentUnknown              404           no such agent (or version of it)
        └── BatchRefused              409           a batch refused whole; says both counts

    RosterError                       status
    ├── RosterUnavailable             None or 5xx   nothing answered in time (no replica on
    │                                               NATS, nothing at the URL), a 5xx, or an
    │                                               answer that is no reply of the roster's
    └── RosterRefused                 4xx           the roster's answer (a problem detail): a
                                                    key refused (401, 403), a heartbeat
                                                    refused (400, 409, 422)

    DispatcherError                   status
    ├── DispatcherUnavailable         None or 5xx   as RosterUnavailable, of the dispatcher
    └── DispatcherRefused             4xx           the dispatcher's answer (a problem detail)

    LiveKitError                      status        retryable
    ├── LiveKitUnavailable            None, 408,    yes   LiveKit did not answer in time, the
    │                                 429 or 5xx          connection failed, or it answered that
    │                                                     it cannot now (the same request may
    │                                                     pass later)
    └── LiveKitRefused                4xx           no    LiveKit's answer: a bad key, a grant
        │                                                 missing, a request it does not take
        └── RoomGone                  404                 Twirp ``not_found``: the room (or the
                                                          dispatch) is not there

Each service's pair is also an :class:`Unavailable` and a :class:`Refused` (one ``__init__`` each,
what :func:`pinecall_clients.answers.read_answer` raises given the pair). The LiveKit tree is
:mod:`pinecall_clients.livekit`'s; ``code`` names each kind as the runtime's
own errors do (``livekit_unavailable``, ``livekit_refused``, ``room_gone``).
"""

from __future__ import annotations

from typing import Any, ClassVar

import msgspec

from pinecall_contracts.problems import ProblemDetails


class Unavailable(Exception):
    """A service did not answer in time, answered a 5xx, or answered no reply of its own; each
    service's ``<Service>Unavailable`` is one. ``status``: the last HTTP status (None: nothing
    answered)."""

    status: int | None

    def __init__(self, detail: str, status: int | None = None) -> None:
        super().__init__(detail)
        self.status = status


class Refused(Exception):
    """A service's 4xx; each service's ``<Service>Refused`` is one. ``problem``: its problem
    detail, ``status`` its status."""

    status: int | None

    def __init__(self, problem: ProblemDetails) -> None:
        super().__init__(f"{problem.status} {problem.title}: {problem.detail or ''}".strip())
        self.problem = problem
        self.status = problem.status


class CallLogError(Exception):
    """Base of the tree; ``status`` is the last HTTP status seen (None: nothing answered)."""

    status: int | None = None


class CallLogUnavailable(CallLogError, Unavailable):
    pass


class CallLogRefused(CallLogError, Refused):
    """A 4xx; ``problem`` is the service's problem detail."""


class CallUnknown(CallLogRefused):
    pass


class AgentUnknown(CallLogRefused):
    """A 404 of the agents' routes: the org has no such agent (or version) there."""


class BatchRefused(CallLogRefused):
    """A 409 on a batch: the log took ``written`` entries from the writer; the batch followed
    ``after``. ``None`` where the 409 was not about counts (a sealed call)."""

    @property
    def written(self) -> int | None:
        return _count(self.problem, "written")

    @property
    def after(self) -> int | None:
        return _count(self.problem, "after")


def _count(problem: ProblemDetails, name: str) -> int | None:
    for error in problem.errors or []:
        value: Any = error.get(name)
        if isinstance(value, int):
            return value
    return None


def refused(
    status: int, body: bytes, unknown: type[CallLogRefused] = CallUnknown
) -> CallLogRefused:
    """The error of a 4xx answer whose body is (or should be) a problem detail; a 404 is
    ``unknown`` (what the route names: a call, an agent)."""
    problem = problem_of(status, body)
    if status == 404:
        return unknown(problem)
    if status == 409:
        return BatchRefused(problem)
    return CallLogRefused(problem)


class RosterError(Exception):
    """Base of the roster's tree; ``status`` as :class:`CallLogError`'s."""

    status: int | None = None


class RosterUnavailable(RosterError, Unavailable):
    pass


class RosterRefused(RosterError, Refused):
    """A 4xx; ``problem`` is the roster's problem detail."""


class DispatcherError(Exception):
    """Base of the dispatcher's tree; ``status`` as :class:`CallLogError`'s."""

    status: int | None = None


class DispatcherUnavailable(DispatcherError, Unavailable):
    pass


class DispatcherRefused(DispatcherError, Refused):
    """A 4xx; ``problem`` is the dispatcher's problem detail."""


class LiveKitError(Exception):
    """Base of the LiveKit tree; ``status`` is LiveKit's HTTP status (None: nothing answered)."""

    code: ClassVar[str] = "livekit_error"
    retryable: ClassVar[bool] = False

    def __init__(self, detail: str, status: int | None = None) -> None:
        super().__init__(detail)
        self.status = status


class LiveKitUnavailable(LiveKitError):
    code, retryable = "livekit_unavailable", True


class LiveKitRefused(LiveKitError):
    code = "livekit_refused"


class RoomGone(LiveKitRefused):
    code = "room_gone"


def problem_of(status: int, body: bytes) -> ProblemDetails:
    """The problem detail of an error answer's ``body`` (one made of it, where it is none)."""
    try:
        return msgspec.json.decode(body, type=ProblemDetails)
    except msgspec.MsgspecError:
        return ProblemDetails(title=body[:200].decode(errors="replace"), status=status)
