"""Call backs asked for, and listed for the dispatcher's follow-ups (issue 18, "Call backs,
dialled").

==========================================  ================  ================================
route                                       key               answer
==========================================  ================  ================================
POST /v1/callbacks                          all four          AgentEntry (CallbackRequest)
GET  /v1/callbacks?since=<ts>&limit=<n>     service, operator CallbackPage (every environment)
==========================================  ================  ================================

A call back is written by ``POST /v1/callbacks``: ``callback.requested`` on the agent's log of
the key's environment (an operator or service key names it, ``?environment=``; production by
default), once per call; 422 when it names neither the caller's number nor a contact. The
dispatcher, which owns follow-ups (``shared/DESIGN.md``, "Services"), reads them here with its
service key and dials each. ``since`` is an aware RFC 3339 time (422 naive or malformed); the page is oldest first.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Annotated

from litestar import get, post
from litestar.params import FromQuery, JSONBody, QueryParameter

from pinecall_call_log.access import AnyRequest, environment_for, key_of, service_of
from pinecall_contracts.calls import AgentEntry, CallbackPage, CallbackRequest
from pinecall_servicekit.db import utcnow
from pinecall_servicekit.errors import BadRequest, Unprocessable
from pinecall_servicekit.http import problems

Limit = Annotated[int, QueryParameter(ge=1, le=1000)]
_RFC3339_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ]")


@get("/v1/callbacks", responses=problems(400, 401, 403, 422, 503))
async def list_callbacks(
    request: AnyRequest, since: FromQuery[dt.datetime], limit: Limit = 500
) -> CallbackPage:
    """Call backs of every environment requested at or after ``since``, oldest first."""
    await key_of(request)
    if not _RFC3339_DATE.match(request.query_params.get("since", "")):
        # Litestar reads query values leniently: a number would be a Unix time here
        raise BadRequest(
            "since is an RFC 3339 time (2026-12-03T12:00:00+00:00), not a number",
            errors=[{"message": "not a date-time", "key": "since", "source": "query"}],
        )
    if since.tzinfo is None:
        raise Unprocessable(
            "since is a time with its offset (RFC 3339, e.g. 2026-12-03T12:00:00+00:00)",
            errors=[{"message": "no offset", "key": "since", "source": "query"}],
        )
    return await service_of(request).store.callbacks.since(since, limit)


@post("/v1/callbacks", status_code=200, responses=problems(400, 401, 403, 422, 503))
async def callbacks(
    request: AnyRequest, data: JSONBody[CallbackRequest], environment: FromQuery[str | None] = None
) -> AgentEntry:
    """Call this caller back: ``callback.requested`` on the agent's log, once per call."""
    environment = environment_for(await key_of(request), environment)
    if data.number is None and data.contact is None:
        raise Unprocessable("name the caller's number or contact")
    service = service_of(request)
    entry, made = await service.store.agents.callback(environment, data, utcnow())
    if made:
        service.callbacks[environment] += 1
    return entry


ROUTES = [callbacks, list_callbacks]
