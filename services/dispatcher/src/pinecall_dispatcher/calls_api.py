"""The dispatcher's outbound calls on HTTP (issue 18; :mod:`.outbound` places them).

=====================================  =========  ============================================
route                                  key        answer
=====================================  =========  ============================================
POST /v1/calls/outbound                app        OutboundCall (OutboundRequest): 201 placed,
                                                  200 the same ``id`` placed before
                                                  (``replayed``); 400 a malformed body (an
                                                  ``to`` that is no E.164 number, a field
                                                  missing); 422 ``unknown_agent``; 409
                                                  ``id_reused``; 429 over the org's quota;
                                                  503 ``not_ready``, ``fleet_full``,
                                                  ``no_outbound_trunk``,
                                                  ``livekit_unavailable``
=====================================  =========  ============================================

The call is placed in the app key's environment. Every refusal is a problem detail and makes
nothing: no row, no room, no dial.
"""

from __future__ import annotations

from litestar import Request, Response, post
from litestar.datastructures import State
from litestar.params import JSONBody

from pinecall_contracts.outbound import OutboundCall, OutboundRequest
from pinecall_dispatcher.outbound import place_outbound
from pinecall_dispatcher.service import DispatcherService
from pinecall_servicekit.http import problems, request_key

AnyRequest = Request[object, object, State]


@post(
    "/v1/calls/outbound",
    status_code=201,
    responses=problems(400, 401, 403, 409, 422, 429, 503),
)
async def outbound_call(
    request: AnyRequest, data: JSONBody[OutboundRequest]
) -> Response[OutboundCall]:
    """Ring ``to`` for ``agent`` of ``org`` in the app key's environment: 201 with the call, or
    200 with the call an earlier request of the same ``id`` placed (nothing dialled again)."""
    service: DispatcherService = request.app.state.dispatcher
    key = await request_key(request, service.keyring, org=data.org or None, agent=data.agent)
    placed = await place_outbound(service.outbound, data, environment=key.environment or "")
    return Response(placed, status_code=200 if placed.replayed else 201)


ROUTES = [outbound_call]
