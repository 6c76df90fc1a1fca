"""Who a call-log request acts for: its key, its environment, its call (the one policy of
every route, :mod:`.api`'s and the routes of :mod:`.callbacks`, :mod:`.definitions`,
:mod:`.numbers`, :mod:`.recordings` and :mod:`.stream`).

A fleet or app key acts for its own environment (another is ``Forbidden``, 403); an operator or
service key for the one it names (production by default, or none where a thing is per
environment: ``Unprocessable``, 422). A call is found after its key is verified (401 before 404)
and checked against the key's environment after (403).
"""

from __future__ import annotations

from typing import Annotated

from litestar import Request
from litestar.datastructures import State
from litestar.params import FromQuery, PathParameter

from pinecall_call_log.service import CallLogService
from pinecall_contracts.calls import CallRecord
from pinecall_contracts.ids import ENVIRONMENTS
from pinecall_contracts.keys import KeyInfo
from pinecall_servicekit.errors import Forbidden, Unprocessable
from pinecall_servicekit.http import request_key
from pinecall_servicekit.keys import EVERY_ENVIRONMENT

AnyRequest = Request[object, object, State]
CallPath = Annotated[str, PathParameter(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$(?![\s\S])")]
AgentPath = Annotated[str, PathParameter(pattern=r"^[a-z0-9][a-z0-9_.-]{0,127}$(?![\s\S])")]


def service_of(request: AnyRequest) -> CallLogService:
    """The replica's call-log service (the app's state)."""
    service: CallLogService = request.app.state.call_log
    return service


async def key_of(request: AnyRequest) -> KeyInfo:
    """The request's key, if it may do what the route needs (the one policy)."""
    return await request_key(request, service_of(request).keyring)


def environment_for(key: KeyInfo, environment: FromQuery[str | None] = None) -> str:
    """The environment a request acts for: the key's own (``Forbidden`` for another), or the
    one an operator or service key names (production when none; ``Unprocessable`` for no such
    environment)."""
    if key.kind in EVERY_ENVIRONMENT:
        if environment is not None and environment not in ENVIRONMENTS:
            raise Unprocessable(
                f"no environment {environment!r}: it is {' or '.join(ENVIRONMENTS)}"
            )
        return environment or "production"
    if key.environment is None or (environment and environment != key.environment):
        raise Forbidden(f"a key of {key.environment} cannot act for {environment}")
    return key.environment


def environment_named(key: KeyInfo, environment: str | None, what: str) -> str:
    """As :func:`environment_for`, but an operator or service key must name the environment
    (``what`` is per environment: no default would be right for both): ``Unprocessable``
    naming ``?environment=`` when it does not."""
    if key.kind in EVERY_ENVIRONMENT and environment is None:
        kind = f"{'an' if key.kind == 'operator' else 'a'} {key.kind} key"
        raise Unprocessable(
            f"{kind} names the environment of {what}: ?environment="
            f"{' or ?environment='.join(ENVIRONMENTS)}",
            errors=[{"message": f"required with {kind}", "key": "environment",
                     "source": "query"}],
        )  # fmt: skip
    return environment_for(key, environment)


async def call_for(request: AnyRequest, call: str) -> CallRecord:
    """Verify the key, then find the call (404), then the key's environment against it (403)."""
    key = await key_of(request)
    record = await service_of(request).identity(call)
    environment_for(key, record.environment)
    return record
