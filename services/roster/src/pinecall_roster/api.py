"""The roster's HTTP API (seed 000, "The gateway hears every worker", "The burst").

==========================================  ==========  =======================================
route                                       key         answer
==========================================  ==========  =======================================
POST /v1/fleet/heartbeat                    fleet       HeartbeatReply
GET  /v1/fleet/wanted?scaled&seats&most     fleet       Wanted (422 without scaled and seats)
GET  /v1/ops/fleet[?fleet=]                 service or  RosterSnapshot
                                            operator
GET  /v1/ops/fleets                         service or  FleetRecords
                                            operator
POST /v1/ops/fleet/{fleet}/{worker}/cordon  operator    CordonSetting (body: CordonRequest or none)
POST /v1/ops/fleet/{fleet}/{worker}/uncordon operator   CordonSetting
POST /v1/ops/keys/{key_id}/revoke           operator    KeyInfo; every replica forgets it at once
==========================================  ==========  =======================================

A service key reads what the operator's key reads, and is refused (403) what only an operator
does: a cordon, a revocation.

A worker is named in a path as ``<fleet>/<worker>`` (the cordon's name, start left out or not).
Every error is a problem detail; nothing is recorded on an error. A heartbeat whose ``worker`` or
``agent_name`` is a string outside the grammar of worker names (``pinecall_contracts.ids``: no dot
in the worker part, a start of digits) is a 422 that names the rule: a name the roster cannot
parse back could be listed but never cordoned.
"""

from __future__ import annotations

from typing import Annotated

import msgspec
from litestar import Request, get, post
from litestar.datastructures import State
from litestar.params import FromPath, FromQuery, JSONBody, PathParameter, QueryParameter

from pinecall_contracts.fleet import (
    CordonRequest,
    CordonSetting,
    FleetRecords,
    HeartbeatReply,
    RosterSnapshot,
    Wanted,
    WorkerHeartbeat,
)
from pinecall_contracts.ids import (
    FLEET_PATTERN,
    WORKER_PART_PATTERN,
    WorkerNameError,
    parse_worker_name,
)
from pinecall_contracts.keys import KeyInfo
from pinecall_roster.service import RosterService
from pinecall_servicekit.body import StrictBody
from pinecall_servicekit.errors import BadRequest, PinecallError, Unprocessable
from pinecall_servicekit.http import problems, request_key

AnyRequest = Request[object, object, State]


FleetPath = Annotated[str, PathParameter(pattern=FLEET_PATTERN)]
"""A fleet's name in a route (``pinecall``)."""
HostPath = Annotated[str, PathParameter(pattern=WORKER_PART_PATTERN)]
"""A worker's name after its fleet, in a route (``worker-a``, or ``worker-a.1791067258``)."""


def _service(state: State) -> RosterService:
    service: RosterService = state.roster
    return service


async def _key(request: AnyRequest) -> KeyInfo:
    return await request_key(request, _service(request.app.state).keyring)


class _Names(msgspec.Struct):
    """A heartbeat's names alone, read leniently (every other field is the strict decoding's)."""

    worker: object = None
    agent_name: object = None


class _HeartbeatBody(StrictBody):
    """A heartbeat's body, decoded once and strictly (:class:`StrictBody`); one refused and
    whose ``worker`` or ``agent_name`` is a string but no worker name is ``Unprocessable``
    naming the rule, not the 400 quoting the contract's pattern. A body that decodes holds
    names of the grammar (the contract's patterns are its own), so only a refused one is read
    again."""

    @classmethod
    def refused(cls, body: bytes, problem: BadRequest) -> PinecallError:
        try:
            names = msgspec.json.decode(body, type=_Names)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return problem
        for field, value in (("worker", names.worker), ("agent_name", names.agent_name)):
            if isinstance(value, str):
                try:
                    parse_worker_name(value)
                except WorkerNameError as exc:
                    return Unprocessable(f"{field}: {exc}")
        return problem


@post(
    "/v1/fleet/heartbeat",
    status_code=200,
    responses=problems(400, 401, 403, 409, 422, 503),
    dto=_HeartbeatBody,
)
async def heartbeat(request: AnyRequest, data: JSONBody[WorkerHeartbeat]) -> HeartbeatReply:
    """A worker's heartbeat, every 5 s, with its environment's fleet key."""
    key = await _key(request)
    return await _service(request.app.state).heartbeat(data, key)


@get("/v1/fleet/wanted", responses=problems(400, 401, 403, 422, 503))
async def wanted(
    request: AnyRequest,
    scaled: Annotated[str, QueryParameter(min_length=1, description="a worker name prefix")],
    seats: Annotated[int, QueryParameter(ge=1, le=10_000, description="seats per worker")],
    most: Annotated[int | None, QueryParameter(ge=0, le=100_000)] = None,
) -> Wanted:
    """How many scaled workers the key's fleet should run (KEDA, every 15 s)."""
    key = await _key(request)
    service = _service(request.app.state)
    fleet = service.fleet_of_key(key)
    if "/" in scaled and not scaled.startswith(f"{fleet}/"):  # it could match no worker of it
        raise Unprocessable(
            f"scaled is a prefix of {fleet}'s workers' host names, or of their whole names "
            f"({fleet}/…): {scaled!r} is neither"
        )
    return service.wanted(fleet, scaled, seats, most)


@get("/v1/ops/fleet", responses=problems(400, 401, 403, 503))
async def fleet(request: AnyRequest, fleet: FromQuery[str | None] = None) -> RosterSnapshot:
    """Every fleet with its workers and totals (or only ``fleet``)."""
    await _key(request)
    return _service(request.app.state).snapshot(fleet)


@get("/v1/ops/fleets", responses=problems(401, 403, 503))
async def fleets(request: AnyRequest) -> FleetRecords:
    """The fleets rows: name, environment, the LiveKit each dispatches on."""
    await _key(request)
    service = _service(request.app.state)
    await service.reload_fleets()
    return FleetRecords(fleets=list(service.fleets.values()))


async def _cordon(
    request: AnyRequest, worker: str, cordoned: bool, reason: str | None, force: bool = False
) -> CordonSetting:
    key = await _key(request)
    try:
        return await _service(request.app.state).cordon(
            worker, cordoned, key.name, reason, force=force
        )
    except WorkerNameError as exc:
        raise BadRequest(str(exc)) from exc


@post(
    "/v1/ops/fleet/{fleet_name:str}/{worker:str}/cordon",
    status_code=200,
    responses=problems(400, 401, 403, 404, 422, 503),
)
async def cordon(
    request: AnyRequest,
    fleet_name: FleetPath,
    worker: HostPath,
    data: JSONBody[CordonRequest | None] = None,
) -> CordonSetting:
    """Cordon a worker: it takes no new call, finishes what it holds and exits 3."""
    body = data or CordonRequest()
    return await _cordon(request, f"{fleet_name}/{worker}", body.cordoned, body.reason, body.force)


@post(
    "/v1/ops/fleet/{fleet_name:str}/{worker:str}/uncordon",
    status_code=200,
    responses=problems(400, 401, 403, 404, 422, 503),
)
async def uncordon(request: AnyRequest, fleet_name: FleetPath, worker: HostPath) -> CordonSetting:
    """Lift a worker's cordon."""
    return await _cordon(request, f"{fleet_name}/{worker}", False, None)


@post("/v1/ops/keys/{key_id:str}/revoke", status_code=200, responses=problems(401, 403, 404, 503))
async def revoke_key(request: AnyRequest, key_id: FromPath[str]) -> KeyInfo:
    """Revoke a key; every replica forgets it at once (said on NATS)."""
    await _key(request)
    return await _service(request.app.state).revoke_key(key_id)


ROUTES = [heartbeat, wanted, fleet, fleets, cordon, uncordon, revoke_key]
