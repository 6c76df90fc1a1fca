"""One HTTP request to a service and its answer, in the asking client's own error pair.

The roster's heartbeat and the dispatcher's ops reads ask the same way: one request, not retried;
nothing answering (an httpx error), a 5xx, or a 200 whose body is no reply is the client's
*unavailable* error; any other status is its *refused* error, with the answer's problem detail
(:func:`~pinecall_clients.errors.problem_of`). The call log's client is not one of them: it
retries (stamina), takes any 2xx, and names a refusal by its status
(:func:`~pinecall_clients.errors.refused`).
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TypeVar

import httpx
import msgspec

from pinecall_clients.errors import Refused, Unavailable, problem_of
from pinecall_contracts.base import Contract, decode

R = TypeVar("R", bound=Contract)


async def read_answer(
    sent: Awaitable[httpx.Response],
    reply: type[R],
    *,
    who: str,
    path: str,
    unavailable: type[Unavailable],
    refused: type[Refused],
) -> R:
    """The ``reply`` that ``sent`` (a request to ``who``'s ``path``) was answered with.

    Raises ``unavailable(detail, status)`` when nothing answered (status None), for a 5xx, or for
    a 200 that is no ``reply``; ``refused(problem)`` for any other status (a 4xx).
    """
    try:
        r = await sent
    except httpx.HTTPError as exc:
        raise unavailable(f"{who} did not answer at {path}: {exc!r}") from exc
    if r.status_code != 200:
        problem = problem_of(r.status_code, r.content)
        if r.status_code >= 500:
            raise unavailable(f"{r.status_code} {problem.title}", r.status_code)
        raise refused(problem)
    try:
        return decode(r.content, reply)
    except msgspec.MsgspecError as exc:
        raise unavailable(f"{who} answered no {reply.__name__} at {path}: {exc}") from exc
