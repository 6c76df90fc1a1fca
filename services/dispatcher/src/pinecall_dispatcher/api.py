"""The dispatcher's HTTP API.

=====================================  =========  ============================================
route                                  key        answer
=====================================  =========  ============================================
POST /v1/tokens                        app        VisitorToken (TokenRequest); 422
                                                  ``unknown_agent``, 503 ``not_ready`` or
                                                  ``fleet_full``, 429 over the org's quota
POST /v1/written-calls                 service    WrittenAdmitted (WrittenAdmission): the chat
                                                  service's written calls; 422
                                                  ``unknown_agent``, 429 over the org's quota
GET  /v1/ops/offers[?fleet=]           operator   OffersSnapshot: rooms waiting, kept, refused
GET  /v1/ops/calls/{call}/journal      operator   Journal: the call's offers and why; 404 for a
                                                  call it has no record of
POST /v1/ops/quotas                    operator   Quota (Quota): set an org's concurrent_calls
POST /v1/evals/voice                   app, op.   VoiceEvalResult (VoiceEval): the simulated
                                                  caller (:mod:`pinecall_dispatcher.evals`)
=====================================  =========  ============================================

Every error is a problem detail, and a refused request writes nothing (a refusal at admission is
counted, and ``fleet_full`` writes ``fleet.full`` on the agent's log, as the seed says).
"""

from __future__ import annotations

from typing import Annotated

from litestar import Request, get, post
from litestar.datastructures import State
from litestar.params import FromQuery, JSONBody, PathParameter

from pinecall_contracts.dispatch import (
    Journal,
    OffersSnapshot,
    Quota,
    TokenRequest,
    VisitorToken,
    WrittenAdmission,
    WrittenAdmitted,
)
from pinecall_contracts.ids import ENVIRONMENTS
from pinecall_contracts.keys import KeyInfo
from pinecall_dispatcher.evals import api as evals_api
from pinecall_dispatcher.service import DispatcherService
from pinecall_servicekit.errors import Unprocessable
from pinecall_servicekit.http import problems, request_key

AnyRequest = Request[object, object, State]
CallPath = Annotated[str, PathParameter(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$(?![\s\S])")]


def _service(request: AnyRequest) -> DispatcherService:
    service: DispatcherService = request.app.state.dispatcher
    return service


async def _key(request: AnyRequest, *, org: str | None = None, agent: str | None = None) -> KeyInfo:
    return await request_key(request, _service(request).keyring, org=org, agent=agent)


@post("/v1/tokens", status_code=200, responses=problems(400, 401, 403, 422, 429, 503))
async def token(request: AnyRequest, data: JSONBody[TokenRequest]) -> VisitorToken:
    """A web visitor's token for an agent, in the app key's environment."""
    key = await _key(request, org=data.org or None, agent=data.agent)
    return await _service(request).admission.token(data, key)


@post("/v1/written-calls", status_code=200, responses=problems(400, 401, 403, 422, 429, 503))
async def written_call(request: AnyRequest, data: JSONBody[WrittenAdmission]) -> WrittenAdmitted:
    """Admit a written call before the chat service opens it (the org's quota, the agent's
    existence; no fleet, no seat)."""
    await _key(request, org=data.org or None, agent=data.agent)
    if data.environment not in ENVIRONMENTS:
        raise Unprocessable(f"a written call's environment is {' or '.join(ENVIRONMENTS)}")
    return await _service(request).admission.written(data)


@get("/v1/ops/offers", responses=problems(401, 403, 503))
async def offers(request: AnyRequest, fleet: FromQuery[str | None] = None) -> OffersSnapshot:
    """Each fleet's rooms waiting in ten minutes and refusals; rooms kept past a minute."""
    await _key(request)
    return await _service(request).offers(fleet)


@get("/v1/ops/calls/{call:str}/journal", responses=problems(400, 401, 403, 404, 503))
async def journal(request: AnyRequest, call: CallPath) -> Journal:
    """A call's journal: each offer and why, and where its room went; 404 ``not_found`` for a
    call the dispatcher has no record of."""
    await _key(request)
    return await _service(request).store.views.journal(call)


@post("/v1/ops/quotas", status_code=200, responses=problems(400, 401, 403, 422, 503))
async def set_quota(request: AnyRequest, data: JSONBody[Quota]) -> Quota:
    """Set an org's concurrent_calls in one environment (held at the token endpoint)."""
    await _key(request)
    if data.environment not in ENVIRONMENTS:
        raise Unprocessable(f"a quota's environment is {' or '.join(ENVIRONMENTS)}")
    return await _service(request).store.admissions.set_quota(data)


ROUTES = [token, written_call, offers, journal, set_quota, *evals_api.ROUTES]
